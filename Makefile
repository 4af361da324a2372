# make demo : set up, build the library, the demo and the Python module, run the demo of the
#             tutorial's graphs (GPU when present, else CPU)
# make test : set up, build, run every CPU test (release + ASan/UBSan) and the Python tests
# After either, `. .venv/bin/activate` gives a Python that imports this build (see `link-venv`).
JOBS   ?= $(shell nproc)
# The project's venv (scripts/setup.sh makes it); PY=python3 uses another interpreter.
PY     ?= $(CURDIR)/.venv/bin/python
BUILD  ?= build/release
ASAN   ?= build/asan
TSAN   ?= build/tsan
CMAKE_FLAGS ?=

.PHONY: all setup build build-asan build-tsan demo test test-cpp test-asan test-tsan test-python \
        test-install test-property test-asan-python format format-check clean \
        link-venv build-demo test-readme docs

all: build

setup:
	@bash scripts/setup.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DDNNGRAPH_BUILD_PYTHON=ON \
	  -DPython_EXECUTABLE=$$(command -v $(PY)) $(CMAKE_FLAGS)

build: setup $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)
	@$(MAKE) --no-print-directory link-venv

# What `make demo` and the README need: the library, the demo, the Python module and the CLI
# (no tests, benchmarks or torch ops).
build-demo: setup $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target demo _dnngraph dnngraph_cli
	@$(MAKE) --no-print-directory link-venv

# Makes the in-tree Python package importable from the venv: a dnngraph-build.pth in its
# site-packages names $(BUILD)/python. Only a virtual environment is touched (PY=python3
# outside a venv: nothing is written; use PYTHONPATH=$(BUILD)/python there). An installed
# dnngraph (pip install .) in the same venv comes first on sys.path.
link-venv:
	@$(PY) -c 'import sys, sysconfig, pathlib; \
	  venv = sys.prefix != sys.base_prefix; \
	  pth = pathlib.Path(sysconfig.get_paths()["purelib"]) / "dnngraph-build.pth"; \
	  venv and pth.write_text(sys.argv[1] + "\n"); \
	  print(f"link-venv: {pth} -> {sys.argv[1]}" if venv else \
	        f"link-venv: {sys.executable} is not a venv; use PYTHONPATH={sys.argv[1]}")' \
	  $(abspath $(BUILD))/python

# One sanitizer tree for the C++ tests and the Python module (test-asan-python).
$(ASAN)/CMakeCache.txt:
	cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=Debug -DDNNGRAPH_SANITIZE=ON -DDNNGRAPH_CUDA=OFF \
	  -DDNNGRAPH_BUILD_BENCH=OFF -DDNNGRAPH_BUILD_SAMPLES=OFF -DDNNGRAPH_BUILD_TOOLS=OFF \
	  -DDNNGRAPH_BUILD_PYTHON=ON -DPython_EXECUTABLE=$$(command -v $(PY)) $(CMAKE_FLAGS)

build-asan: setup $(ASAN)/CMakeCache.txt
	cmake --build $(ASAN) -j $(JOBS) --target dnngraph_tests

# ThreadSanitizer over the threaded tests (handles, engine state, concurrent executes). OpenMP
# runs one thread per team here: libgomp is not instrumented, so its own threads would only
# give false reports. Not in CI: the TSan tree is a third full build (docs/hardening.md).
$(TSAN)/CMakeCache.txt:
	cmake -S . -B $(TSAN) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDNNGRAPH_SANITIZE=thread -DDNNGRAPH_CUDA=OFF \
	  -DDNNGRAPH_BUILD_BENCH=OFF -DDNNGRAPH_BUILD_SAMPLES=OFF -DDNNGRAPH_BUILD_TOOLS=OFF $(CMAKE_FLAGS)

build-tsan: setup $(TSAN)/CMakeCache.txt
	cmake --build $(TSAN) -j $(JOBS) --target dnngraph_tests

# RefFp4's parallel-nibble test sets its own OpenMP team of 4: TSan cannot see libgomp's barrier
# and reports the serial pack after it as a race.
test-tsan: build-tsan
	OMP_NUM_THREADS=1 TSAN_OPTIONS=halt_on_error=1 $(TSAN)/tests/dnngraph_tests \
	  --gtest_filter='*Threaded*:*Concurrent*:-RefFp4.ParallelPointwiseWritesEveryNibbleThreaded'

demo: build-demo
	$(BUILD)/samples/demo

# GTEST_BRIEF: a test binary prints only its failures and a summary.
test-cpp: build
	cd $(BUILD) && GTEST_BRIEF=1 ctest --output-on-failure

test-asan: build-asan
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 $(ASAN)/tests/dnngraph_tests --gtest_brief=1

test-python: build
	PYTHONSAFEPATH=1 PYTHONPATH=$(CURDIR)/$(BUILD)/python $(PY) -m pytest -q python/tests tests/compat

# The hypothesis property suite at full size (>= 1e5 cases, bounded by PROPERTY_TIMEOUT s).
PROPERTY_SCALE   ?= 1.25
PROPERTY_TIMEOUT ?= 1500
test-property: build
	DNNGRAPH_PROPERTY_SCALE=$(PROPERTY_SCALE) DNNGRAPH_PROPERTY_MIN_CASES=100000 \
	  PYTHONSAFEPATH=1 PYTHONPATH=$(CURDIR)/$(BUILD)/python timeout $(PROPERTY_TIMEOUT) \
	  $(PY) -m pytest -q -p no:cacheprovider python/tests/property

# The Python module and library under ASan+UBSan, running the Python tests and a slice of the
# property suite (the sanitizer runtimes are preloaded into the uninstrumented interpreter).
# Only the module is built: its stubs would import it without the preload. The dnngraph.torch
# ops (torch/) are not built in this tree: their tests run in test-python. --capture=sys: a
# sanitizer report (written to fd 2 by the runtime, which then exits 1) reaches the log.
test-asan-python: setup $(ASAN)/CMakeCache.txt
	cmake --build $(ASAN) -j $(JOBS) --target _dnngraph
	LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
	  ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  DNNGRAPH_PROPERTY_SCALE=0.05 PYTHONSAFEPATH=1 PYTHONPATH=$(CURDIR)/$(ASAN)/python \
	  $(PY) -m pytest -q -p no:cacheprovider --capture=sys --ignore-glob='*/test_torch_*' python/tests

# find_package(dnngraph) from an install tree: the README's example and examples/cpp built
# against it, then the README's snippets.
test-install: build
	rm -rf build/install
	cmake --install $(BUILD) --prefix $(CURDIR)/build/install >/dev/null
	env -u LD_LIBRARY_PATH build/install/bin/dnngraph info >/dev/null  # finds lib/ by its RPATH
	cmake -S tests/install_consumer -B build/consumer -DCMAKE_PREFIX_PATH=$(CURDIR)/build/install >/dev/null
	cmake --build build/consumer -j $(JOBS)
	build/consumer/consumer >/dev/null
	cmake -S examples/cpp -B build/example-cpp -DCMAKE_PREFIX_PATH=$(CURDIR)/build/install >/dev/null
	cmake --build build/example-cpp -j $(JOBS)
	build/example-cpp/matmul_gelu
	$(MAKE) --no-print-directory test-readme DNNGRAPH_PREFIX=$(CURDIR)/build/install

# README.md's snippets as a reader runs them: Python in the activated venv (the one PY belongs
# to) without PYTHONPATH, the C++ example with the documented g++ line, the CLI lines, and the
# find_package snippet against DNNGRAPH_PREFIX (an install tree) when given.
test-readme:
	VENV=$$($(PY) -c 'import sys; print(sys.prefix)') PY=$(PY) BUILD=$(BUILD) \
	  DNNGRAPH_PREFIX=$(DNNGRAPH_PREFIX) bash tests/readme_test.sh

test: format-check test-cpp test-python test-asan test-install

# The API reference: C++ from include/dnngraph with Doxygen (build/docs/html/index.html; its
# warnings are errors; Debian's doxygen is installed first when missing), and the Python
# package's docstrings and signatures with pydoc (build/docs/python/dnngraph.html) once the
# module is built (make demo).
docs:
	@command -v doxygen >/dev/null || { echo "docs: installing doxygen with apt-get"; \
	  SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get install -y -qq doxygen >/dev/null; }
	@mkdir -p build/docs/python
	DNNGRAPH_DOCS_OUT=$(CURDIR)/build/docs doxygen docs/api/Doxyfile
	@echo "docs: build/docs/html/index.html"
	@if ls $(BUILD)/python/dnngraph/_dnngraph*.so >/dev/null 2>&1; then \
	  cd build/docs/python && PYTHONSAFEPATH=1 PYTHONPATH=$(CURDIR)/$(BUILD)/python \
	    $(PY) -m pydoc -w dnngraph >/dev/null && echo "docs: build/docs/python/dnngraph.html"; \
	else echo "docs: the Python module is not built (make demo): no Python reference"; fi

format:
	clang-format -i $$(git ls-files '*.cpp' '*.hpp')

# The code follows .clang-format.
format-check: setup
	clang-format --dry-run -Werror $$(git ls-files '*.cpp' '*.hpp')

clean:
	rm -rf build
