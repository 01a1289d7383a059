"""The C functions PyTorch calls, called directly through ctypes (device and stream arguments,
statistics, errors)."""
import ctypes

import pytest
import torch

import umem._lib as L

STREAM_A = ctypes.c_void_p(0x1000)
STREAM_B = ctypes.c_void_p(0x2000)

# These tests pass a made-up stream handle, which is only harmless where no GPU backend records
# events on it; on a GPU machine test_gpu.py exercises the same entry points with real streams.
pytestmark = pytest.mark.skipif(
    torch.cuda.is_available(),
    reason="a GPU is present: the CUDA backend would record events on the fake stream handle")


def lib():
    return L.lib()


def stats(device):
    return L.take_json(lib().umem_torch_memory_stats_json(device))


def test_malloc_free_with_device_and_stream_updates_stats():
    before = stats(0)
    p = lib().umem_torch_pluggable_malloc(1 << 20, 0, STREAM_A)
    assert p and p % 256 == 0
    ctypes.memset(p, 0xAB, 1 << 20)
    s = stats(0)
    assert s["allocation.all.current"] == before["allocation.all.current"] + 1
    assert s["requested_bytes.all.current"] == before["requested_bytes.all.current"] + (1 << 20)
    assert s["allocated_bytes.all.current"] >= before["allocated_bytes.all.current"] + (1 << 20)
    assert s["allocated_bytes.all.peak"] >= s["allocated_bytes.all.current"]
    lib().umem_torch_pluggable_free(p, 1 << 20, 0, STREAM_A)
    after = stats(0)
    assert after["allocation.all.current"] == before["allocation.all.current"]
    # The free records nothing (Note [Lazy stream fences]): the block stays with its stream...
    assert after["umem.held_for_streams_bytes"] == 1 << 20
    # ...until a request on another stream misses: the fence it records has passed at once (no
    # GPU), so that request gets the block.
    q = lib().umem_torch_pluggable_malloc(1 << 20, 0, STREAM_B)
    assert q == p
    assert stats(0)["umem.held_for_streams_bytes"] == 0
    lib().umem_torch_pluggable_free(q, 1 << 20, 0, STREAM_B)


def test_reset_peak_stats():
    p = lib().umem_torch_pluggable_malloc(4 << 20, 0, STREAM_A)
    lib().umem_torch_pluggable_free(p, 4 << 20, 0, STREAM_A)
    assert stats(0)["allocated_bytes.all.peak"] >= 4 << 20
    L.check(lib().umem_torch_reset_peak_stats(0))
    s = stats(0)
    assert s["allocated_bytes.all.peak"] == s["allocated_bytes.all.current"]


def test_zero_size_gives_null_without_error():
    assert lib().umem_torch_pluggable_malloc(0, 0, STREAM_A) is None


def test_negative_size_fails_with_message():
    assert lib().umem_torch_pluggable_malloc(-5, 0, STREAM_A) is None
    assert "negative size -5" in L.last_error()


def test_freeing_a_foreign_pointer_is_an_error_not_a_crash():
    buf = ctypes.create_string_buffer(4096)
    lib().umem_torch_pluggable_free(ctypes.addressof(buf), 4096, 0, STREAM_A)
    assert "not allocated by this umem allocator" in L.last_error()
    assert lib().umem_torch_last_status() == 1  # UMEM_ERR_INVALID_ARGUMENT


def test_memory_fraction_caps_reserved_memory_not_what_the_cache_serves():
    # PyTorch's meaning: the cap bounds new reservations; a block already cached is served.
    L.check(lib().umem_torch_empty_cache(1, None))
    before = stats(0)["num_ooms"]
    cached = lib().umem_torch_pluggable_malloc(8 << 20, 0, STREAM_A)
    lib().umem_torch_pluggable_free(cached, 8 << 20, 0, STREAM_A)
    L.check(lib().umem_torch_set_memory_fraction(1e-12, 0))  # a few bytes of the node
    try:
        again = lib().umem_torch_pluggable_malloc(8 << 20, 0, STREAM_A)
        assert again == cached
        lib().umem_torch_pluggable_free(again, 8 << 20, 0, STREAM_A)
        reserved = stats(0)["reserved_bytes.all.current"]
        # needs a new segment
        assert lib().umem_torch_pluggable_malloc(64 << 20, 0, STREAM_A) is None
        assert stats(0)["reserved_bytes.all.current"] <= reserved  # the refused growth is gone
        assert lib().umem_torch_last_status() == L.UMEM_ERR_OUT_OF_MEMORY
        message = L.last_error()
        assert message.startswith("CUDA out of memory. Tried to allocate 64.00 MiB."), message
        assert "memory fraction caps device 0" in message, message
        assert stats(0)["num_ooms"] == before + 1
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        L.check(lib().umem_torch_mem_get_info(0, ctypes.byref(free), ctypes.byref(total)))
        assert total.value < 1 << 20
    finally:
        L.check(lib().umem_torch_set_memory_fraction(1.0, 0))  # PyTorch's meaning: no cap
    p = lib().umem_torch_pluggable_malloc(64 << 20, 0, STREAM_A)
    assert p
    lib().umem_torch_pluggable_free(p, 64 << 20, 0, STREAM_A)


def test_memory_fraction_refuses_a_growth_before_it_is_reserved():
    # A live block keeps the expandable segment from being given back: a growth made for a
    # refused request would stay reserved, and the next request would get it for free.
    L.check(lib().umem_torch_empty_cache(1, None))
    keep = lib().umem_torch_pluggable_malloc(64 << 20, 0, STREAM_A)
    reserved = stats(0)["reserved_bytes.all.current"]
    L.check(lib().umem_torch_set_memory_fraction(1e-12, 0))
    try:
        for _ in range(2):
            assert lib().umem_torch_pluggable_malloc(256 << 20, 0, STREAM_A) is None
            assert lib().umem_torch_last_status() == L.UMEM_ERR_OUT_OF_MEMORY
            assert "memory fraction caps device 0" in L.last_error()
            assert stats(0)["reserved_bytes.all.current"] == reserved
    finally:
        L.check(lib().umem_torch_set_memory_fraction(1.0, 0))
        lib().umem_torch_pluggable_free(keep, 64 << 20, 0, STREAM_A)


def test_empty_cache_gives_back_the_free_tail_of_a_segment_that_keeps_a_live_block():
    # PyTorch's empty_cache unmaps the free pages of its expandable segments; before umem did
    # the same, the freed 256 MiB stayed reserved and a memory fraction could not refuse them.
    L.check(lib().umem_torch_empty_cache(1, None))
    keep = lib().umem_torch_pluggable_malloc(64 << 20, 0, STREAM_A)
    big = lib().umem_torch_pluggable_malloc(256 << 20, 0, STREAM_A)
    with_both = stats(0)["reserved_bytes.all.current"]
    lib().umem_torch_pluggable_free(big, 256 << 20, 0, STREAM_A)
    L.check(lib().umem_torch_empty_cache(1, None))
    assert stats(0)["reserved_bytes.all.current"] <= with_both - (256 << 20)
    L.check(lib().umem_torch_set_memory_fraction(1e-12, 0))
    try:
        assert lib().umem_torch_pluggable_malloc(256 << 20, 0, STREAM_A) is None
        assert lib().umem_torch_last_status() == L.UMEM_ERR_OUT_OF_MEMORY
    finally:
        L.check(lib().umem_torch_set_memory_fraction(1.0, 0))
    again = lib().umem_torch_pluggable_malloc(256 << 20, 0, STREAM_A)
    assert again == big, "the given-back range is taken back"
    lib().umem_torch_pluggable_free(again, 256 << 20, 0, STREAM_A)
    lib().umem_torch_pluggable_free(keep, 64 << 20, 0, STREAM_A)


def test_memory_fraction_reads_back_and_zero_allows_no_new_memory():
    f = ctypes.c_double()
    L.check(lib().umem_torch_get_memory_fraction(0, ctypes.byref(f)))
    assert f.value == 1.0
    L.check(lib().umem_torch_empty_cache(1, None))
    L.check(lib().umem_torch_set_memory_fraction(0.0, 0))
    try:
        L.check(lib().umem_torch_get_memory_fraction(0, ctypes.byref(f)))
        assert f.value == 0.0
        assert lib().umem_torch_pluggable_malloc(32 << 20, 0, STREAM_A) is None
        assert lib().umem_torch_last_status() == L.UMEM_ERR_OUT_OF_MEMORY
    finally:
        L.check(lib().umem_torch_set_memory_fraction(1.0, 0))


def test_out_of_memory_message_starts_like_pytorchs():
    out = ctypes.c_void_p()
    huge = 1 << 55  # 32 PiB: more than any node
    assert lib().umem_torch_extension_alloc(huge, 0, STREAM_A, ctypes.byref(out)) == \
        L.UMEM_ERR_OUT_OF_MEMORY
    message = L.last_error()
    assert message.startswith("CUDA out of memory. Tried to allocate 33554432.00 GiB. GPU 0 has a "
                              "total capacity of "), message
    assert " is reserved by PyTorch but unallocated. umem: NUMA node " in message
    assert lib().umem_torch_extension_alloc(1 << 61, 0, STREAM_A, ctypes.byref(out)) == \
        L.UMEM_ERR_OUT_OF_MEMORY
    assert "Tried to allocate more than 1EB memory" in L.last_error()


def test_bad_fraction_is_refused():
    assert lib().umem_torch_set_memory_fraction(1.5, 0) == 1
    assert "not in [0, 1]" in L.last_error()


def test_mem_get_info_reports_the_nodes_free_memory():
    node = stats(0)["umem.numa_node"] if "umem.numa_node" in stats(0) else 0
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    L.check(lib().umem_torch_mem_get_info(0, ctypes.byref(free), ctypes.byref(total)))
    meminfo = open(f"/sys/devices/system/node/node{node}/meminfo").read().split("\n")
    kb = {line.split()[2].rstrip(":"): int(line.split()[3]) for line in meminfo if line.strip()}
    assert total.value == kb["MemTotal"] * 1024
    assert 0 < free.value <= total.value
    # Within the node's free memory plus what umem caches there (1 GiB slack for other processes).
    assert abs(free.value - kb["MemFree"] * 1024) < (1 << 30) + stats(-1)["reserved_bytes.all.current"]


def test_empty_cache_returns_segments():
    p = lib().umem_torch_pluggable_malloc(64 << 20, 0, STREAM_A)
    lib().umem_torch_pluggable_free(p, 64 << 20, 0, STREAM_A)
    assert stats(-1)["reserved_bytes.all.current"] >= 64 << 20
    released = ctypes.c_size_t()
    L.check(lib().umem_torch_empty_cache(1, ctypes.byref(released)))
    assert released.value >= 64 << 20
    assert stats(-1)["reserved_bytes.all.current"] < 64 << 20


def test_init_after_first_use_is_refused():
    assert lib().umem_torch_init(b"spill:warn") == L.UMEM_ERR_ALREADY_INITIALIZED
    assert "already exists" in L.last_error()


def test_event_provider_after_first_use_is_refused():
    assert lib().umem_torch_set_event_provider(None) == L.UMEM_ERR_ALREADY_INITIALIZED


@pytest.mark.parametrize("mode", [b"bind", b"preferred"])
def test_memory_policy_modes(mode):
    import threading
    result = []

    def run():  # a fresh thread: the policy is per thread
        result.append(lib().umem_torch_set_memory_policy(0, mode))
    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert result == [0]


def test_memory_policy_rejects_unknown_mode():
    assert lib().umem_torch_set_memory_policy(0, b"everywhere") == 1
    assert "bind, preferred" in L.last_error()
