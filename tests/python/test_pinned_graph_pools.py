"""The graph-capture pools of umem's pinned-memory allocator (Note [Pinned memory in graph
captures] in torch_bridge/extension/pinned_graph_pools.hpp), built against the installed PyTorch's
c10 (CPU-only builds too) and driven the way CUDAGraph drives at::HostAllocator: capture_begin ->
begin_allocate_to_pool, capture_end -> end_allocate_to_pool, reset -> release_pool. The GPU tier
(tests/python/test_gpu_pinned_memory.py) runs a real capture and replay."""
import pytest
import torch
import torch.utils.cpp_extension

from umem import _extension

# c10 and pybind11 alone (no torch/extension.h, which load_inline would add): a quick build.
SOURCE = r"""
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "pinned_graph_pools.hpp"

namespace ue = umem_extension;

// Pools whose filters accept one stream id each (CUDAGraph's filter accepts its capture stream),
// with blocks named by small integers.
struct pools {
  ue::pinned_graph_pools p;
  static c10::Stream stream(int64_t id) {
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(c10::DeviceType::CPU), id);
  }
  static void* block(int64_t b) { return reinterpret_cast<void*>(b * 256); }
  void begin(int64_t pool, int64_t accepted) {
    p.begin({0, static_cast<unsigned long long>(pool)},
            [accepted](c10::Stream s) { return s.id() == accepted; });
  }
  void end(int64_t pool) { p.end({0, static_cast<unsigned long long>(pool)}); }
  std::vector<int64_t> release(int64_t pool) {
    std::vector<int64_t> out;
    for (void* b : p.release({0, static_cast<unsigned long long>(pool)}))
      out.push_back(reinterpret_cast<int64_t>(b) / 256);
    return out;
  }
  void adopt(int64_t b, int64_t on) { p.adopt(block(b), stream(on)); }
  bool keep(int64_t b) { return p.keep(block(b)); }
  bool capturing() const { return p.capturing(); }
};

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  pybind11::class_<pools>(m, "Pools")
      .def(pybind11::init<>())
      .def("begin", &pools::begin)
      .def("end", &pools::end)
      .def("release", &pools::release)
      .def("adopt", &pools::adopt)
      .def("keep", &pools::keep)
      .def("capturing", &pools::capturing);
}
"""


@pytest.fixture(scope="module")
def Pools(tmp_path_factory):
    folder = tmp_path_factory.mktemp("build")
    source = folder / "pinned_graph_pools_test.cpp"
    source.write_text(SOURCE)
    module = torch.utils.cpp_extension.load(
        "umem_pinned_graph_pools_test", sources=[str(source)],
        extra_include_paths=[_extension.source_dir()], build_directory=str(folder),
        # The header is C++17 (as PyTorch is from 2.1); 1.x builds extensions as C++14.
        extra_cflags=["-std=c++17"] if torch.__version__.startswith("1.") else [], verbose=False)
    return module.Pools


def test_without_a_capture_no_block_joins_a_pool_and_every_free_goes_ahead(Pools):
    p = Pools()
    assert not p.capturing()
    p.adopt(1, 7)
    assert p.keep(1) is False


def test_a_block_freed_while_its_graph_lives_is_kept_until_the_graph_is_reset(Pools):
    p = Pools()
    p.begin(1, 7)
    assert p.capturing()
    p.adopt(10, 7)  # on the capturing stream: the graph's
    p.adopt(11, 8)  # another stream: not the graph's
    assert p.keep(10) is True
    assert p.keep(11) is False
    p.end(1)
    assert not p.capturing()
    p.adopt(12, 7)  # after the capture: an ordinary block again
    assert p.keep(12) is False
    assert p.release(1) == [10]
    assert p.keep(10) is False  # the pool is gone: nothing is kept any more


def test_a_pool_shared_by_two_graphs_keeps_its_blocks_until_both_are_reset(Pools):
    p = Pools()
    p.begin(5, 7)
    p.adopt(20, 7)
    p.end(5)
    p.begin(5, 9)  # a second graph captured into the same pool (torch.cuda.graph_pool_handle())
    p.adopt(21, 9)
    p.end(5)
    assert p.keep(20) is True and p.keep(21) is True
    assert p.release(5) == []  # one graph still uses the pool
    assert sorted(p.release(5)) == [20, 21]


def test_a_block_still_live_at_the_reset_is_freed_when_its_tensor_goes(Pools):
    p = Pools()
    p.begin(2, 7)
    p.adopt(30, 7)
    p.end(2)
    assert p.release(2) == []
    assert p.keep(30) is False
    p.begin(2, 7)  # the pool id can be used again afterwards
    p.end(2)
    assert p.release(2) == []


def test_misuse_is_a_clear_error(Pools):
    p = Pools()
    p.begin(3, 7)
    with pytest.raises(RuntimeError, match=r"a capture already allocates to pool \(0,3\)"):
        p.begin(3, 7)
    with pytest.raises(RuntimeError, match=r"no capture allocates to pool \(0,4\)"):
        p.end(4)
    with pytest.raises(RuntimeError, match=r"release of pool \(0,4\), which no graph uses"):
        p.release(4)
    p.end(3)
    assert p.release(3) == []
    with pytest.raises(RuntimeError, match=r"release of pool \(0,3\), which no graph uses"):
        p.release(3)

