// The one table of umem's environment options. Nothing else in umem calls getenv: every knob a
// user can set is listed here with its documentation, so `umtopo --options` (and the README
// table) can show every effective value.
#pragma once

#include <optional>
#include <span>
#include <string>

namespace umem {

struct env_option {
  const char* env_name;
  const char* default_text;  // what happens when unset, for humans
  const char* doc;
};

// Every option umem reads, in documentation order.
std::span<const env_option> env_options();

// The value of a listed option, or nullopt when unset or empty. Throws umem::error(internal) for
// a name that is not in the table, so an unlisted knob cannot be introduced silently.
std::optional<std::string> env_value(const char* env_name);

}  // namespace umem
