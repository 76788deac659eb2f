#pragma once
// The output rows of a tile kernel in groups of 4, then the 3, 2 or 1 left over, each group
// handed to f(first_row, RowCount<R>{}) so that the kernel is instantiated for R. Shared by
// kv_kernels_avx2.cpp and kv_kernels_avx512.cpp; in an unnamed namespace (and without standard
// headers, as kv_kernels.h explains) so that each file compiles its own copy for its instruction
// set and the linker never picks one file's copy for the other.

namespace tokenscope::kv::detail {
namespace {

template <int R>
struct RowCount {
    static constexpr int value = R;
};

template <class F>
inline void for_row_groups(int rows, F&& f) {
    int r = 0;
    for (; r + 4 <= rows; r += 4) f(r, RowCount<4>{});
    switch (rows - r) {
        case 3:
            f(r, RowCount<3>{});
            break;
        case 2:
            f(r, RowCount<2>{});
            break;
        case 1:
            f(r, RowCount<1>{});
            break;
        default:
            break;
    }
}

}  // namespace
}  // namespace tokenscope::kv::detail
