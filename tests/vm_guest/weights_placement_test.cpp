// Inside the multi-NUMA VM (tests/vm): a safetensors file read for NUMA node N (the weights
// reader into umem memory bound to N, what umem.torch.load_safetensors(node=N) does) has every
// page of its tensors on N, for every node, also when the reading threads run on N's CPUs
// (Note [Reading weights] in safetensors_file.hpp). The file is written here after the format.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "placement_checks.hpp"
#include "umem/allocator/allocator.hpp"
#include "umem/allocator/gpu/no_gpu_mapper.hpp"
#include "umem/allocator/source/host_numa_source.hpp"
#include "umem/weights/safetensors_file.hpp"

namespace umem::placement_test {
namespace {

using namespace umem::alloc;
namespace fs = std::filesystem;

class weights_placement : public placement_checks {
 protected:
  void SetUp() override {
    placement_checks::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    path_ = (fs::temp_directory_path() / ("weights-" + std::to_string(::getpid()))).string();
    // Three U8 tensors covering checked_bytes, byte i of the data = i mod 251.
    const std::size_t third = checked_bytes / 3;
    std::string header = "{";
    for (int t = 0; t < 3; ++t) {
      const std::size_t begin = t * third;
      const std::size_t end = t == 2 ? checked_bytes : begin + third;
      header += std::string(t ? ", " : "") + "\"t" + std::to_string(t) +
                R"(": {"dtype": "U8", "shape": [)" + std::to_string(end - begin) +
                R"(], "data_offsets": [)" + std::to_string(begin) + ", " + std::to_string(end) +
                "]}";
    }
    header += "}";
    header.append((8 - header.size() % 8) % 8, ' ');
    std::string prefix(8, '\0');
    for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    std::string data(checked_bytes, '\0');
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i % 251);
    std::ofstream(path_, std::ios::binary) << prefix << header << data;
  }
  void TearDown() override {
    if (!path_.empty()) fs::remove(path_);
  }

  std::string path_;
};

TEST_F(weights_placement, every_page_of_the_tensors_is_on_the_node_they_were_loaded_for) {
  allocator a(alloc_options{}, machine(), std::make_unique<host_numa_source>(),
              std::make_unique<no_gpu_mapper>("weights placement: host memory only"));
  for (int node : nodes()) {
    const request on{placement{placement_kind::node, node, {}}, std::nullopt};
    for (const bool bound_readers : {false, true}) {
      weights::read_options o{3, false, {}};
      if (bound_readers) o.cpus = cpus_of(node);
      const weights::loaded_safetensors f = weights::read_safetensors(
          path_, [&](std::size_t bytes) { return a.allocate(bytes, on); },
          [&](void* p) { a.deallocate(p); }, o);
      ASSERT_EQ(f.data_bytes, checked_bytes);
      EXPECT_EQ(static_cast<unsigned char>(f.data[checked_bytes - 1]), (checked_bytes - 1) % 251);
      SCOPED_TRACE("node " + std::to_string(node) + (bound_readers ? ", readers on its CPUs" : ""));
      expect_all_on(node, f.data, f.data_bytes);
      a.deallocate(f.block);
    }
  }
}

}  // namespace
}  // namespace umem::placement_test
