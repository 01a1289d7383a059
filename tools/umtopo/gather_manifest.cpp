#include "gather_manifest.hpp"

#include <nlohmann/json.hpp>

#include "umem/core/error.hpp"

namespace umem::umtopo {
namespace {

constexpr const char* kFormat = "umem-gather";

}  // namespace

std::string manifest_to_json(const gather_manifest& m) {
  nlohmann::ordered_json j;
  j["format"] = kFormat;
  j["version"] = m.version;
  j["date"] = m.date;
  j["kernel"] = {{"release", m.kernel_release}, {"version", m.kernel_version}, {"machine", m.machine}};
  j["umem_version"] = m.umem_version;
  j["absent"] = m.absent;
  j["unreadable"] = m.unreadable;
  j["umem_environment"] = m.umem_environment;
  return j.dump(2) + "\n";
}

gather_manifest manifest_from_json(std::string_view text, const std::string& origin) {
  const auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("format", "") != kFormat)
    throw_error(errc::parse_error, origin + " is not a umem gather manifest (no \"format\": \"" + kFormat + "\")");
  const auto version = j.find("version");
  if (version == j.end() || !version->is_number_integer())
    throw_error(errc::parse_error, origin + " has no integer \"version\"");
  if (*version != kGatherVersion)
    throw_error(errc::parse_error, origin + " is gather version " + version->dump() + "; this umtopo reads version " +
                                       std::to_string(kGatherVersion));
  try {
    gather_manifest m;
    m.date = j.at("date").get<std::string>();
    const auto& k = j.at("kernel");
    m.kernel_release = k.at("release").get<std::string>();
    m.kernel_version = k.at("version").get<std::string>();
    m.machine = k.at("machine").get<std::string>();
    m.umem_version = j.at("umem_version").get<std::string>();
    m.absent = j.at("absent").get<std::vector<std::string>>();
    m.unreadable = j.at("unreadable").get<std::vector<std::string>>();
    m.umem_environment = j.at("umem_environment").get<std::map<std::string, std::string>>();
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw_error(errc::parse_error, origin + ": " + e.what());
  }
}

}  // namespace umem::umtopo
