// Raising PyTorch's own C++ exceptions from the allocator hook, without linking against PyTorch.
//
// Note [Why the hook throws c10 errors]
// CUDAPluggableAllocator calls the alloc function and uses its result without checking for NULL,
// so a failing allocation must throw. PyTorch's Python bindings turn c10::OutOfMemoryError into
// torch.OutOfMemoryError (== torch.cuda.OutOfMemoryError) and any other std::exception into
// RuntimeError. c10::OutOfMemoryError adds nothing to c10::Error (`using Error::Error`), so the
// exception object is a c10::Error built by libc10's exported constructor, thrown with
// OutOfMemoryError's type_info (catch clauses match on the thrown type_info; the object's
// virtual functions are Error's, which OutOfMemoryError does not override). Both symbols are
// looked up in the already loaded libtorch_python and its dependencies; where that fails (no
// PyTorch in the process, an ABI that does not match) the fallbacks are c10::Error, then
// std::runtime_error, both RuntimeError in Python: the message is umem's in every case.
#pragma once

#include <string>

namespace umem::torch_bridge {

// Throws c10::OutOfMemoryError (out_of_memory) or c10::Error carrying `message`, or
// std::runtime_error where PyTorch's symbols are not found.
[[noreturn]] void throw_torch_error(bool out_of_memory, const std::string& message);

}  // namespace umem::torch_bridge
