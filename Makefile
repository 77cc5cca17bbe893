# Thin wrapper over CMake for the everyday verbs. See README.md.
#   make                 release build in build/
#   make demo            build and run the main demonstration
#   make check           build and run the whole test suite (CTest)
#   make check-sanitize  the whole suite built with address + undefined sanitizers (build-san/)
#   make check-asan      the same (an alias of check-sanitize)
#   make check-tsan      the whole suite built with ThreadSanitizer (build-tsan/)
#   make check-clang     the whole suite built with clang (build-clang/), warnings as errors
#   make check-windows   cross-build for Windows with MinGW-w64 (build-win/) and run the suite under
#                        Wine (docs/windows.md); make demo-windows runs the demo there
#   make bench           build and run the benchmarks; writes build/bench/results.json
#   make check-bounds    worst-case instructions of every allocator call under callgrind, 1 MiB .. 1 GiB,
#                        against the published bounds (bench/bounds.tsv, docs/realtime.md); needs valgrind
#   make fuzz            libFuzzer targets (clang, library instrumented), each for FUZZ_SECONDS [60]
#   make install         install into PREFIX (default /usr/local)
#   make format          clang-format every C source in place
#   make check-doom      Chocolate Doom on heapkit's zone against the stock engine (docs/doom.md)
BUILD ?= build
SANBUILD ?= build-san
TSANBUILD ?= build-tsan
CLANGBUILD ?= build-clang
FUZZBUILD ?= build-fuzz
WINBUILD ?= build-win
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
PREFIX ?= /usr/local
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# Warnings are errors in CI (CI=true is set there) or with WERROR=ON.
ifneq ($(CI),)
WERROR ?= ON
endif
WERROR ?= OFF
CMAKE_FLAGS ?=
BENCH_FLAGS ?=

MAKEFLAGS += --no-print-directory
CMAKE_QUIET = --log-level=WARNING

.PHONY: check-bounds
.PHONY: all build demo check check-sanitize check-asan check-tsan check-clang check-windows build-windows demo-windows \
  bench fuzz install format clean

all: build

build:
	cmake $(CMAKE_QUIET) -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DHEAPKIT_WERROR=$(WERROR) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	./$(BUILD)/examples/demo
	./$(BUILD)/examples/demo_maps $(BUILD)/demo
	-./$(BUILD)/heapkit record -q -o $(BUILD)/demo/demo_maps.hkt -- ./$(BUILD)/examples/demo_maps $(BUILD)/demo/rec >/dev/null \
	  && ./$(BUILD)/heapkit report $(BUILD)/demo/demo_maps.hkt -o $(BUILD)/demo/report.html

check: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

check-sanitize:
	cmake $(CMAKE_QUIET) -S . -B $(SANBUILD) -DCMAKE_BUILD_TYPE=Debug -DHEAPKIT_SANITIZE=ON -DHEAPKIT_WERROR=$(WERROR) $(CMAKE_FLAGS)
	cmake --build $(SANBUILD) -j $(JOBS)
	ctest --test-dir $(SANBUILD) --output-on-failure -j $(JOBS) -LE no-sanitize

check-asan: check-sanitize

check-tsan:
	cmake $(CMAKE_QUIET) -S . -B $(TSANBUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHEAPKIT_TSAN=ON -DHEAPKIT_WERROR=$(WERROR) \
	  -DHEAPKIT_BUILD_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(TSANBUILD) -j $(JOBS)
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ctest --test-dir $(TSANBUILD) --output-on-failure -j $(JOBS) -LE no-sanitize

check-clang:
	cmake $(CMAKE_QUIET) -S . -B $(CLANGBUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang \
	  -DCMAKE_CXX_COMPILER=clang++ -DHEAPKIT_WERROR=ON -DHEAPKIT_BUILD_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(CLANGBUILD) -j $(JOBS)
	ctest --test-dir $(CLANGBUILD) --output-on-failure -j $(JOBS)

# Windows: MinGW-w64 cross-build, tests and demo under Wine (CMAKE_CROSSCOMPILING_EMULATOR).
build-windows:
	cmake $(CMAKE_QUIET) -S . -B $(WINBUILD) -DCMAKE_TOOLCHAIN_FILE=$(CURDIR)/cmake/mingw-w64.cmake -DCMAKE_BUILD_TYPE=Release \
	  -DHEAPKIT_WERROR=$(WERROR) $(CMAKE_FLAGS)
	cmake --build $(WINBUILD) -j $(JOBS)

# One test alone first, and its Wine server left to exit (-w): the first
# Wine run makes the prefix, and runs making a fresh prefix at once can fail
# ("chdir to .../server-...": seen in CI).
WINESERVER ?= $(firstword $(wildcard /usr/lib/wine/wineserver64 /usr/lib/wine/wineserver) wineserver)
check-windows: build-windows
	ctest --test-dir $(WINBUILD) -R '^cache_create_variants$$' --output-on-failure
	-WINEPREFIX=$(CURDIR)/$(WINBUILD)/wineprefix $(WINESERVER) -w
	ctest --test-dir $(WINBUILD) --output-on-failure -j $(JOBS) || \
	  { echo "check-windows: running the failed tests again, up to twice (under load a Wine process can die before the test starts)"; \
	    ctest --test-dir $(WINBUILD) --rerun-failed --output-on-failure || \
	    ctest --test-dir $(WINBUILD) --rerun-failed --output-on-failure; }

demo-windows: build-windows
	cmake -E env WINEPREFIX=$(CURDIR)/$(WINBUILD)/wineprefix WINEDEBUG=-all $(or $(WINE),/usr/lib/wine/wine64) \
	  $(WINBUILD)/examples/demo.exe
	cmake -E env WINEPREFIX=$(CURDIR)/$(WINBUILD)/wineprefix WINEDEBUG=-all $(or $(WINE),/usr/lib/wine/wine64) \
	  $(WINBUILD)/examples/demo_maps.exe $(WINBUILD)/demo

bench: build
	-./bench/install-peers.sh
	mkdir -p $(BUILD)/bench
	./$(BUILD)/bench/heapkit-bench --out $(BUILD)/bench/results.json $(BENCH_FLAGS)

# Fails when a call's worst count exceeds its published bound by more than 10%
# (BOUNDS_SCALES="1 2" for the small heaps only; docs/realtime.md).
check-bounds: build
	./bench/bounds.sh $(BUILD) --check

fuzz:
	cmake $(CMAKE_QUIET) -S . -B $(FUZZBUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
	  -DCMAKE_CXX_COMPILER=clang++ -DHEAPKIT_BUILD_BENCH=OFF -DHEAPKIT_BUILD_EXAMPLES=OFF $(CMAKE_FLAGS)
	cmake --build $(FUZZBUILD) -j $(JOBS) --target fuzzers
	./fuzz/run.sh $(FUZZBUILD) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(SANBUILD) $(TSANBUILD) $(CLANGBUILD) $(FUZZBUILD) $(WINBUILD)

# Chocolate Doom on heapkit's zone: fetches the engine's Debian source into
# $(BUILD)/doom, builds it stock and on heapkit, plays Freedoom's demos on
# both (docs/doom.md). Installs its packages when run as root.
.PHONY: check-doom
check-doom: build
	@if [ "$$(id -u)" = 0 ]; then ./ports/doom/install-deps.sh; fi
	./ports/doom/check.sh $(BUILD)/doom $(abspath $(BUILD))/heapkit
