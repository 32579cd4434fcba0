// The one include of cpp-httplib. Debian's libcpp-httplib.so is built with OpenSSL, zlib and Brotli support,
// which changes the layout of its classes: these macros must match the build of the shared library (its
// pkg-config Cflags), or the header and the library disagree about object sizes.
#pragma once

#ifndef CPPHTTPLIB_OPENSSL_SUPPORT
#define CPPHTTPLIB_OPENSSL_SUPPORT
#endif
#ifndef CPPHTTPLIB_ZLIB_SUPPORT
#define CPPHTTPLIB_ZLIB_SUPPORT
#endif
#ifndef CPPHTTPLIB_BROTLI_SUPPORT
#define CPPHTTPLIB_BROTLI_SUPPORT
#endif
#include <httplib.h>
