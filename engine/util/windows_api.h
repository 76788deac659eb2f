#pragma once
// <windows.h> the one way the engine includes it: without the rarely used APIs and without the
// min/max macros that would break std::min/std::max. Include only inside #ifdef _WIN32.
#ifdef _WIN32
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#endif
