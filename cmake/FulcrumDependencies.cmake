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
find_package(Torch REQUIRED)
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
target_link_libraries(fulcrum::torch INTERFACE ${TORCH_LIBRARIES})
target_include_directories(fulcrum::torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})

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
endif()
