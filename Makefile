# The two commands of the README: `make demo` and `make test`.
PYTHON ?= python3
BUILD  ?= build
JOBS   ?= $(shell nproc)

.PHONY: all deps configure build test demo bench clean

all: build

deps:
	@scripts/install-deps

$(BUILD)/build.ninja: | deps
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_PREFIX_PATH="$$($(PYTHON) -c 'import torch; print(torch.utils.cmake_prefix_path)')" \
	  -DPython3_EXECUTABLE="$$(command -v $(PYTHON))" >/dev/null

build: deps $(BUILD)/build.ninja
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: build
	@scripts/demo $(BUILD)/normlab

bench: build
	@$(PYTHON) bench/train_step.py --normlab $(BUILD)/normlab --bench $(BUILD)/normlab_bench

clean:
	rm -rf $(BUILD)
