# Every third-party dependency, found once. All come from Debian bookworm packages
# installed by scripts/setup, except CUDA/NCCL (PyPI wheels, FULCRUM_WITH_CUDA only).

find_package(Threads REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(nlohmann_json 3.11 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(cpprestsdk REQUIRED)
find_package(Protobuf REQUIRED)
find_package(gRPC REQUIRED)
find_package(prometheus-cpp REQUIRED)
find_package(absl REQUIRED)   # time parsing and formatting, string splitting
find_package(CLI11 REQUIRED)  # command-line flags
if(NOT FULCRUM_WITH_CUDA)
  find_package(Torch REQUIRED)  # Debian's CPU libtorch
endif()
if(FULCRUM_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

# yaml-cpp 0.7 in bookworm exports a plain "yaml-cpp" target; give it one stable name.
if(NOT TARGET fulcrum::yaml)
  add_library(fulcrum::yaml INTERFACE IMPORTED)
  target_link_libraries(fulcrum::yaml INTERFACE yaml-cpp)
endif()

# libtorch's exported flags are not warning-clean under -Wpedantic; wrap them as SYSTEM.
add_library(fulcrum::torch INTERFACE IMPORTED)
if(NOT FULCRUM_WITH_CUDA)
  target_link_libraries(fulcrum::torch INTERFACE ${TORCH_LIBRARIES})
  target_include_directories(fulcrum::torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
endif()

if(FULCRUM_WITH_CUDA)
  set(FULCRUM_CUDA_ROOT "$ENV{HOME}/.cache/fulcrum/cuda" CACHE PATH
      "Folder holding the nvidia-cuda-runtime and nvidia-nccl-cu13 wheels (scripts/setup --cuda)")
  find_path(FULCRUM_CUDA_INCLUDE cuda_runtime_api.h
            PATHS ${FULCRUM_CUDA_ROOT} PATH_SUFFIXES nvidia/cu13/include nvidia/cuda_runtime/include NO_DEFAULT_PATH REQUIRED)
  find_path(FULCRUM_NCCL_INCLUDE nccl.h
            PATHS ${FULCRUM_CUDA_ROOT} PATH_SUFFIXES nvidia/cu13/include nvidia/nccl/include NO_DEFAULT_PATH REQUIRED)
  find_library(FULCRUM_CUDART_LIBRARY NAMES cudart libcudart.so.13
               PATHS ${FULCRUM_CUDA_ROOT} PATH_SUFFIXES nvidia/cu13/lib nvidia/cuda_runtime/lib NO_DEFAULT_PATH REQUIRED)
  find_library(FULCRUM_NCCL_LIBRARY NAMES nccl libnccl.so.2
               PATHS ${FULCRUM_CUDA_ROOT} PATH_SUFFIXES nvidia/cu13/lib nvidia/nccl/lib NO_DEFAULT_PATH REQUIRED)
  add_library(fulcrum::cuda INTERFACE IMPORTED)
  target_include_directories(fulcrum::cuda SYSTEM INTERFACE ${FULCRUM_CUDA_INCLUDE} ${FULCRUM_NCCL_INCLUDE})
  target_link_libraries(fulcrum::cuda INTERFACE ${FULCRUM_CUDART_LIBRARY} ${FULCRUM_NCCL_LIBRARY})
  message(STATUS "Fulcrum: CUDA runtime ${FULCRUM_CUDART_LIBRARY}, NCCL ${FULCRUM_NCCL_LIBRARY}")

  # The C++ libtorch from PyPI's CUDA torch wheel (scripts/setup, stage torch-cuda). Its
  # TorchConfig.cmake wants a full CUDA toolkit (nvcc, driver stubs) only to describe targets we
  # never compile kernels for, so the imported target is spelled out here instead.
  set(FULCRUM_TORCH_CUDA_ROOT "$ENV{HOME}/.cache/fulcrum/libtorch-cuda" CACHE PATH
      "Folder holding torch/{include,lib} unpacked from the CUDA torch wheel (scripts/setup)")
  set(_torch "${FULCRUM_TORCH_CUDA_ROOT}/torch")
  if(NOT EXISTS "${_torch}/lib/libtorch_cuda.so")
    message(FATAL_ERROR "no CUDA libtorch in ${_torch}: run scripts/setup --only torch-cuda, "
                        "or set FULCRUM_TORCH_CUDA_ROOT")
  endif()
  target_include_directories(fulcrum::torch SYSTEM INTERFACE
    "${_torch}/include" "${_torch}/include/torch/csrc/api/include")
  target_compile_definitions(fulcrum::torch INTERFACE _GLIBCXX_USE_CXX11_ABI=1 FULCRUM_TORCH_CUDA=1)
  # libtorch_cuda registers the CUDA backend from static initialisers: keep it linked although no
  # symbol of ours names it. Its own CUDA dependencies (cuBLAS, cuDNN, ...) are resolved when it
  # loads on a GPU machine, so the link does not need them here.
  target_link_libraries(fulcrum::torch INTERFACE
    "${_torch}/lib/libtorch.so" "${_torch}/lib/libtorch_cpu.so" "${_torch}/lib/libc10.so"
    "-Wl,--no-as-needed,${_torch}/lib/libtorch_cuda.so,--as-needed"
    "${_torch}/lib/libc10_cuda.so" fulcrum::cuda
    "-Wl,--allow-shlib-undefined" "-Wl,-rpath,${_torch}/lib")
  message(STATUS "Fulcrum: CUDA libtorch ${_torch}")
endif()
