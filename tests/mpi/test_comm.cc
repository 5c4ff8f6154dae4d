#include "mpi_gtest_main.h"
