// The one translation unit that compiles Boost.Asio's and Boost.Beast's
// non-template code (BOOST_ASIO_SEPARATE_COMPILATION,
// BOOST_BEAST_SEPARATE_COMPILATION: src/net/CMakeLists.txt).
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
