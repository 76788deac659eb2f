#pragma once
// The output rows of a tile kernel in groups of Max, then the Max - 1 or fewer left over, each
// group handed to f(first_row, RowCount<R>{}) so that the kernel is instantiated for R. Shared by
// kv_kernels_avx2.cpp and kv_kernels_avx512.cpp; in an unnamed namespace (and without standard
// headers, as kv_kernels.h explains) so that each file compiles its own copy for its instruction
// set and the linker never picks one file's copy for the other.

namespace tokenscope::kv::detail {
namespace {

template <int R>
struct RowCount {
    static constexpr int value = R;
};

// The last group: `left` rows, 1 <= left <= R.
template <int R, class F>
inline void last_row_group(int r, int left, F& f) {
    if constexpr (R > 1) {
        if (left < R) {
            last_row_group<R - 1>(r, left, f);
            return;
        }
    }
    f(r, RowCount<R>{});
}

template <int Max, class F>
inline void for_row_groups(int rows, F&& f) {
    int r = 0;
    for (; r + Max <= rows; r += Max) f(r, RowCount<Max>{});
    if (r < rows) last_row_group<Max - 1>(r, rows - r, f);
}

}  // namespace
}  // namespace tokenscope::kv::detail
