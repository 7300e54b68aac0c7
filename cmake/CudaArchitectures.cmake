# Which GPUs the kernels are compiled for.
#
# CMAKE_CUDA_ARCHITECTURES is a cache variable: pass -DCMAKE_CUDA_ARCHITECTURES=90 to choose.
# Left unset, we ask nvidia-smi for the GPU in this machine and build for exactly that one
# (fast builds, native code). Without a GPU we build for a list that covers Ampere (80) and
# Hopper (90), so a laptop or a CI runner without a GPU still compiles every kernel.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "")
  set(_fa_default_archs "80;90")
  find_program(_fa_nvidia_smi nvidia-smi)
  if(_fa_nvidia_smi)
    execute_process(COMMAND ${_fa_nvidia_smi} --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE _fa_caps RESULT_VARIABLE _fa_rc ERROR_QUIET
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_fa_rc EQUAL 0 AND _fa_caps MATCHES "^([0-9]+)\\.([0-9]+)")
      set(_fa_default_archs "${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
    endif()
  endif()
  set(CMAKE_CUDA_ARCHITECTURES "${_fa_default_archs}" CACHE STRING
      "CUDA architectures to compile for (default: the GPU present, else 80;90)")
endif()
