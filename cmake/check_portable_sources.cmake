# The portability rule, run as the ctest test Portable.PosixHeaders: engine/, models/, apps/ and
# tests/ include POSIX headers only in their platform files, *_posix.cpp, each beside a
# *_windows.cpp (io/atomic_file_*, apps/common/platform_*, tests/common/process_*). Anything
# else the operating system does goes through those files' headers.
# cmake -DSOURCE_DIR=<repository> -P check_portable_sources.cmake
set(posix_headers unistd fcntl spawn signal dlfcn dirent pthread poll termios pwd grp sched
                  semaphore strings syslog "sys/[a-z_]+" "netinet/[a-z_]+" "arpa/[a-z_]+")
list(JOIN posix_headers "|" alternatives)
set(pattern "#[ \t]*include[ \t]*<(${alternatives})\\.h>")
set(offenders)
foreach(folder engine models apps tests)
  file(GLOB_RECURSE sources ${SOURCE_DIR}/${folder}/*.h ${SOURCE_DIR}/${folder}/*.c
       ${SOURCE_DIR}/${folder}/*.cpp)
  foreach(source ${sources})
    if(source MATCHES "_posix\\.cpp$")
      continue()
    endif()
    file(STRINGS ${source} lines REGEX "${pattern}")
    foreach(line ${lines})
      file(RELATIVE_PATH name ${SOURCE_DIR} ${source})
      list(APPEND offenders "${name}: ${line}")
    endforeach()
  endforeach()
endforeach()
if(offenders)
  list(JOIN offenders "\n  " text)
  message(FATAL_ERROR "POSIX headers outside the platform files (*_posix.cpp):\n  ${text}")
endif()
message(STATUS "no POSIX header outside the platform files")
