<#
.SYNOPSIS
  Builds the tokenscope Windows installer (NSIS, or WiX with -Generator WIX).

.DESCRIPTION
  Run from a "Developer PowerShell for VS 2022" (or any PowerShell: the Visual Studio generator
  finds MSVC itself) in the repository root:

    .\packaging\windows\build-installer.ps1 -QtDir C:\Qt\6.7.3\msvc2019_64

  Prerequisites (install once):
    - Visual Studio 2022 (or its Build Tools) with "Desktop development with C++".
    - CMake 3.25 or newer and Git on PATH.
    - Qt 6.5 or newer for MSVC 64-bit from the Qt online installer, with the additional
      library "Qt HTTP Server" (and Qt WebSockets, which it uses). -QtDir is the folder that
      holds bin\windeployqt.exe, e.g. C:\Qt\6.7.3\msvc2019_64.
    - vcpkg (git clone https://github.com/microsoft/vcpkg; .\vcpkg\bootstrap-vcpkg.bat) with
      VCPKG_ROOT set or -VcpkgRoot given. It builds fmt and spdlog from
      packaging\windows\vcpkg.json during the configure step.
    - NSIS 3.03 or newer (makensis.exe on PATH or installed in the default place), or for
      -Generator WIX the WiX Toolset 3 (candle.exe, light.exe; CMake 3.25 does not drive WiX 4).
    - Optional: the CUDA Toolkit 13 with its Visual Studio integration, for the "CUDA backend"
      component. Without it (or with -NoCuda) the installer has the CPU backend only.

  Steps: builds sentencepiece (a static library against the DLL runtime, like everything else)
  into build\windows-deps unless it is there; configures with the windows-msvc preset; builds
  Release; runs cpack. Installing (which cpack does into a staging folder) runs windeployqt on
  tokenscope.exe and copies the other DLLs beside it (packaging\windows\deploy-runtime.cmake).
  The installer lands in build\windows-msvc\packages\tokenscope-<version>-win64.exe.

.PARAMETER QtDir
  The Qt kit folder (contains bin\qmake.exe and bin\windeployqt.exe).
.PARAMETER VcpkgRoot
  The vcpkg checkout; defaults to $env:VCPKG_ROOT.
.PARAMETER Generator
  NSIS (default) or WIX.
.PARAMETER NoCuda
  Build without the CUDA backend even when the toolkit is installed.
#>
[CmdletBinding()]
param(
  [Parameter(Mandatory = $true)][string]$QtDir,
  [string]$VcpkgRoot = $env:VCPKG_ROOT,
  [ValidateSet("NSIS", "WIX")][string]$Generator = "NSIS",
  [switch]$NoCuda,
  [string]$SentencepieceVersion = "v0.2.0"
)
$ErrorActionPreference = "Stop"
Set-StrictMode -Version Latest

function Invoke-Checked {
  param([string]$What, [scriptblock]$Command)
  Write-Host "==> $What"
  & $Command
  if ($LASTEXITCODE -ne 0) { throw "$What failed (exit code $LASTEXITCODE)" }
}

$repo = (Resolve-Path (Join-Path $PSScriptRoot "..\..")).Path
Set-Location $repo

# --- prerequisites --------------------------------------------------------------------------
foreach ($tool in @("cmake", "git")) {
  if (-not (Get-Command $tool -ErrorAction SilentlyContinue)) { throw "$tool is not on PATH" }
}
if (-not (Test-Path (Join-Path $QtDir "bin\windeployqt.exe"))) {
  throw "-QtDir $QtDir has no bin\windeployqt.exe (expected e.g. C:\Qt\6.7.3\msvc2019_64)"
}
if (-not $VcpkgRoot -or -not (Test-Path (Join-Path $VcpkgRoot "scripts\buildsystems\vcpkg.cmake"))) {
  throw "vcpkg not found: set VCPKG_ROOT or pass -VcpkgRoot"
}
$env:VCPKG_ROOT = $VcpkgRoot  # the windows-msvc preset reads its toolchain file from here
if ($Generator -eq "NSIS" -and -not (Get-Command makensis -ErrorAction SilentlyContinue) -and
    -not (Test-Path "${env:ProgramFiles(x86)}\NSIS\makensis.exe")) {
  throw "NSIS (makensis.exe) not found; install NSIS 3.03 or newer"
}

# --- sentencepiece, built once --------------------------------------------------------------
$deps = Join-Path $repo "build\windows-deps"
$spPrefix = Join-Path $deps "sentencepiece"
if (-not (Test-Path (Join-Path $spPrefix "include\sentencepiece_processor.h"))) {
  $spSource = Join-Path $deps "sentencepiece-src"
  if (-not (Test-Path $spSource)) {
    Invoke-Checked "clone sentencepiece $SentencepieceVersion" {
      git clone --depth 1 --branch $SentencepieceVersion https://github.com/google/sentencepiece.git $spSource
    }
  }
  Invoke-Checked "configure sentencepiece" {
    cmake -S $spSource -B (Join-Path $deps "sentencepiece-build") -G "Visual Studio 17 2022" -A x64 `
      -DSPM_ENABLE_SHARED=OFF -DSPM_ENABLE_MSVC_MT_BUILD=OFF "-DCMAKE_INSTALL_PREFIX=$spPrefix"
  }
  Invoke-Checked "build sentencepiece" { cmake --build (Join-Path $deps "sentencepiece-build") --config Release --parallel }
  Invoke-Checked "install sentencepiece" { cmake --install (Join-Path $deps "sentencepiece-build") --config Release }
}

# --- tokenscope -----------------------------------------------------------------------------
$configureArgs = @("--preset", "windows-msvc", "-DCMAKE_PREFIX_PATH=$QtDir;$spPrefix")
if ($NoCuda) { $configureArgs += "-DTOKENSCOPE_CUDA=OFF" }
Invoke-Checked "configure (preset windows-msvc)" { cmake @configureArgs }
Invoke-Checked "build Release" { cmake --build --preset windows-msvc --parallel }

$build = Join-Path $repo "build\windows-msvc"
Push-Location $build
try {
  Invoke-Checked "cpack -G $Generator" { cpack -G $Generator -C Release }
} finally {
  Pop-Location
}

Get-ChildItem (Join-Path $build "packages") -File |
  Where-Object { $_.Extension -in ".exe", ".msi" } |
  ForEach-Object { "{0}  {1:N1} MiB" -f $_.FullName, ($_.Length / 1MB) }
