#pragma once
/* The argument array of a kernel launch (C++): kernel_args_call(kernel, launch, args...)
 * converts each argument to its parameter's type, as a <<< >>> launch does, and returns
 * launch(ptrs) with ptrs[i] the address of argument i, alive for the call. Shared by
 * stencil_launch (cuda_rt.h) and the emulation's cudaLaunchKernelEx (emu/emu.h). */
#include <tuple>
#include <type_traits>
#include <utility>

template <typename... P, typename Launch, typename... A>
static inline auto kernel_args_call(void (*)(P...), Launch launch, A... args)
{
  static_assert(sizeof...(P) == sizeof...(A), "one argument per parameter");
  std::tuple<typename std::decay<P>::type...> values(args...);
  void *ptrs[sizeof...(P) > 0 ? sizeof...(P) : 1];
  std::apply(
      [&](auto &...v) {
        int i = 0;
        ((ptrs[i++] = (void *)&v), ...);
      },
      values);
  return launch(ptrs);
}
