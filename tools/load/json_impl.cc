// The one translation unit of matchbook-load that compiles Boost.JSON (used
// header-only, as in src/gateway).
#include <boost/json/src.hpp>
