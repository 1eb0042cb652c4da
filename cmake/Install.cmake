# Installation rules live here (header, library, CMake package config, pkg-config file).
