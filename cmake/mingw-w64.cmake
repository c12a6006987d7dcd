# Cross-compiling vkgrad for 64-bit Windows on Debian with mingw-w64:
#   apt-get install g++-mingw-w64-x86-64-posix libz-mingw-w64-dev
#   cmake -S . -B build-windows -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64.cmake \
#     -DVulkan_LIBRARY=vulkan-1 -DVKGRAD_ONNX=OFF
#   cmake --build build-windows
# builds the engine's libraries, the models, the apps that need neither cairo nor GLFW, and the
# tests (GoogleTest from Debian's sources, /usr/src/googletest, built with these compilers).
# Vulkan is loaded at run time: vulkan-1 is only a name FindVulkan asks for. Debian packages
# no mingw cairo, GLFW, protobuf or ONNX, so the apps that draw, vkgrad-play and the ONNX
# importer are left out (CMake says so). scripts/test-windows.sh does all this and runs the
# suite under Wine.
# The -posix compilers: the win32 thread model has no std::mutex or std::thread.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(VKGRAD_MINGW_TRIPLE x86_64-w64-mingw32)
set(CMAKE_C_COMPILER ${VKGRAD_MINGW_TRIPLE}-gcc-posix)
set(CMAKE_CXX_COMPILER ${VKGRAD_MINGW_TRIPLE}-g++-posix)
set(CMAKE_RC_COMPILER ${VKGRAD_MINGW_TRIPLE}-windres)

# Libraries and headers come from the mingw tree, never the host's: /usr/include holds glibc's
# headers, which must not be searched. The few host packages that are platform-neutral header
# files (Vulkan's headers, volk's source, nlohmann-json) are linked into a folder of their own
# in the build tree, laid out as /usr is, and searched as a second root.
set(VKGRAD_HOST_HEADERS ${CMAKE_BINARY_DIR}/host-headers)
foreach(entry include/vulkan include/vk_video include/volk.h include/volk.c include/nlohmann
              share/cmake/nlohmann_json)
  if(EXISTS /usr/${entry} AND NOT EXISTS ${VKGRAD_HOST_HEADERS}/usr/${entry})
    get_filename_component(parent ${VKGRAD_HOST_HEADERS}/usr/${entry} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK /usr/${entry} ${VKGRAD_HOST_HEADERS}/usr/${entry} SYMBOLIC)
  endif()
endforeach()
set(CMAKE_FIND_ROOT_PATH /usr/${VKGRAD_MINGW_TRIPLE} ${VKGRAD_HOST_HEADERS})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)  # glslangValidator, spirv-val run on the host
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# pkg-config reads the mingw tree's .pc files alone: the host's (cairo, GLFW) describe Linux
# libraries.
set(ENV{PKG_CONFIG_LIBDIR} /usr/${VKGRAD_MINGW_TRIPLE}/lib/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

# ctest runs the tests (and lists them: gtest_discover_tests) under Wine, through
# wine-run.sh (Debian's wine64 puts no `wine` on PATH, only /usr/lib/wine/wine64).
set(CMAKE_CROSSCOMPILING_EMULATOR ${CMAKE_CURRENT_LIST_DIR}/wine-run.sh)

# Static C and C++ runtimes: the programs run on Windows (or under Wine) without the
# compiler's DLLs beside them.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-static-libgcc -static-libstdc++")
