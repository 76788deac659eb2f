#pragma once
// Integer arithmetic that reports overflow instead of wrapping silently (the GGUF reader's
// element counts and byte sizes).
#include <limits>
#include <type_traits>

namespace tokenscope {

namespace detail {

// Portable C++ for compilers without __builtin_mul_overflow (MSVC), and the reference the tests
// compare the builtin with. Same contract as the builtin for one type T.
template <class T>
constexpr bool mul_overflow_portable(T a, T b, T* out) {
    static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool> && sizeof(T) >= sizeof(int),
                  "for int-sized and wider integers");
    using U = std::make_unsigned_t<T>;
    using L = std::numeric_limits<T>;
    bool overflow = false;
    if constexpr (std::is_unsigned_v<T>) {
        overflow = a != 0 && b > L::max() / a;
    } else if (a > 0) {
        overflow = b > 0 ? a > L::max() / b : b < L::min() / a;
    } else if (a < 0) {
        overflow = b > 0 ? a < L::min() / b : b < L::max() / a;
    }
    // The wrapped product, as the builtin stores it (unsigned arithmetic cannot overflow).
    *out = static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    return overflow;
}

}  // namespace detail

// *out = a * b; true when the exact product does not fit in T (then *out holds it wrapped).
template <class T>
inline bool mul_overflow(T a, T b, T* out) {
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_mul_overflow(a, b, out);
#else
    return detail::mul_overflow_portable(a, b, out);
#endif
}

}  // namespace tokenscope
