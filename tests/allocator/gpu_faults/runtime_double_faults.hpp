// The counted fault switch of a GPU runtime double (tests/cuda_double/counted_faults.hpp), seen
// by the GPU fault injection test through the double's C controls: arm it, read what it counted,
// and count what the double holds live for the allocator (registrations, locks, handles, ...).
// One interface for both doubles, so the test's replay does not know which runtime it drives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace umem::test::gpu_faults {

// A live count of the double: what it is ("cuMemHostRegister registrations") and how many.
struct live_count {
  std::string what;
  long long n = 0;
};

class runtime_double_faults {
 public:
  // The double at `path` (loaded by the test's own runtime load); `prefix` is the controls'
  // "umem_cuda_double_" or "umem_rocr_double_".
  runtime_double_faults(std::string path, std::string prefix)
      : path_(std::move(path)), prefix_(std::move(prefix)) {}

  // Counting restarts from 0; the `fail_at`th fault-able call fails from now on (0: none), and
  // every later one with `persistent`.
  void arm(std::size_t fail_at, bool persistent) const {
    control<void (*)(std::uint64_t, int)>("fail_call")(fail_at, persistent ? 1 : 0);
  }
  std::size_t calls() const { return control<std::uint64_t (*)()>("fault_calls")(); }
  std::size_t injected() const { return control<std::uint64_t (*)()>("faults_injected")(); }
  std::string first_failed() const { return control<const char* (*)()>("first_failed")(); }
  std::string calls_by_entry() const {
    return control<const char* (*)()>("fault_calls_by_entry")();
  }

  // The control `name` (without the prefix) as a `Fn`; throws std::runtime_error when the
  // double is not loaded or has no such control.
  template <class Fn>
  Fn control(const std::string& name) const {
    return reinterpret_cast<Fn>(symbol(prefix_ + name));
  }
  // A count control (`int name()`) with what it counts, for the leak checks.
  live_count count(const std::string& name, std::string what) const {
    return {std::move(what), control<int (*)()>(name)()};
  }

 private:
  void* symbol(const std::string& name) const;
  std::string path_;
  std::string prefix_;
};

}  // namespace umem::test::gpu_faults
