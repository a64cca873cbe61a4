// The one translation unit that compiles Boost.JSON (used header-only).
#include <boost/json/src.hpp>
