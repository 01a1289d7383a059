// mirror<T>: a vendor header's type as umem's own function table spells it, so a compile-time
// check can say that a table entry has exactly the signature the vendor's header declares
// (hsa_runtime/src/rocr_library.cpp against <hsa/hsa.h>, cuda_runtime/src/cuda_header_check.cpp
// against cuda.h). The identity, carried through pointers, const and function pointers; each
// user specializes it, in this namespace, for the vendor's own types.
#pragma once

namespace umem::detail {

template <class T> struct mirror { using type = T; };
template <class T> using mirror_t = typename mirror<T>::type;
template <class T> struct mirror<T*> { using type = mirror_t<T>*; };
template <class T> struct mirror<const T> { using type = const mirror_t<T>; };
template <class R, class... A> struct mirror<R (*)(A...)> {
  using type = mirror_t<R> (*)(mirror_t<A>...);
};

}  // namespace umem::detail
