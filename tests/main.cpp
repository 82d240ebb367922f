// Catch2 entry point for octet's unit tests.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
