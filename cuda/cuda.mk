# cuda/cuda.mk — the CUDA backend, included by the top Makefile.
#
# Finds nvcc (on PATH, in $(CUDA_HOME)/bin, or /usr/local/cuda/bin). When found it
# compiles cuda/*.cu for sm_90 (plus compute_90 PTX, so newer chips JIT it) and sets
# CUDA_OBJS, CUDA_LIBS, CUDA_CFLAGS and GPU_BIN; when not, it says so once and leaves
# them empty. nvcc alone is not enough: CUDA installs differ in the runtime library
# they ship. The static cudart is preferred (the binaries then carry it to the GPU
# machine), a shared one is linked with an rpath, and with neither the backend is left
# out, said once, as without nvcc. nvcc objects are not sanitized under SAN=1: the
# sanitizers instrument our C, and cudart is not ours.
#
#   make build/tests/test-gpu-copy build/bin/b10-gpubench   just the GPU targets

NVCC ?= $(firstword $(shell command -v nvcc 2>/dev/null) \
                    $(if $(CUDA_HOME),$(wildcard $(CUDA_HOME)/bin/nvcc)) \
                    $(wildcard /usr/local/cuda/bin/nvcc))

# Our explicit rules come before the top Makefile's `all`: keep `all` the default.
ifeq ($(.DEFAULT_GOAL),)
.DEFAULT_GOAL := all
endif

CUDA_DIR    := $(if $(strip $(NVCC)),$(patsubst %/bin/,%,$(dir $(realpath $(NVCC)))))
CUDA_LIBDIRS := $(addprefix $(CUDA_DIR)/,lib64 lib targets/x86_64-linux/lib lib/x86_64-linux-gnu)
CUDART_STATIC := $(if $(CUDA_DIR),$(firstword $(wildcard $(addsuffix /libcudart_static.a,$(CUDA_LIBDIRS)))))
CUDART_SHARED := $(if $(CUDA_DIR),$(firstword $(wildcard $(addsuffix /libcudart.so,$(CUDA_LIBDIRS)) \
                                                       $(addsuffix /libcudart.so.[0-9]*,$(CUDA_LIBDIRS)))))
CUDART_HOW  := $(if $(CUDART_STATIC),static,$(if $(CUDART_SHARED),shared))

ifeq ($(strip $(NVCC)),)

ifeq ($(MAKELEVEL),0)
$(info cuda: nvcc not found, building without the CUDA backend)
endif

else ifeq ($(CUDART_HOW),)

ifeq ($(MAKELEVEL),0)
$(info cuda: $(NVCC) found but no libcudart under $(CUDA_DIR), building without the CUDA backend)
endif

else

CUDA_ARCH  ?= -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90
NVCCFLAGS  ?= -O3 -std=c++17 $(CUDA_ARCH) -Xcompiler -fPIC,-Wall,-Wextra,-Wno-unused-parameter \
              -Werror all-warnings

CUDA_SRCS  := $(wildcard cuda/*.cu)
CUDA_OBJS  := $(patsubst cuda/%.cu,$(BUILD)/obj/cuda/%.o,$(CUDA_SRCS))
ifeq ($(CUDART_HOW),static)
CUDA_LIBS  := $(CUDART_STATIC) -lxxhash -lstdc++ -ldl -lpthread -lrt
else
CUDA_LIBS  := $(CUDART_SHARED) -lxxhash -Wl,-rpath,$(dir $(CUDART_SHARED)) -lstdc++ -ldl -lpthread -lrt
endif
# -isystem: the CUDA headers are not ours, and the daemon builds with -Werror.
CUDA_CFLAGS := -DB10_HAVE_CUDA -Icuda -isystem $(CUDA_DIR)/include

GPU_TEST   := $(BUILD)/tests/test-gpu-copy
GPU_BENCH  := $(BUILD)/bin/b10-gpubench
GPU_BIN    := $(GPU_TEST) $(GPU_BENCH)

# Explicit rules: these targets build without the daemon's sources or protoc.
$(BUILD)/obj/cuda/%.o: cuda/%.cu cuda/gpu-copy.h
	$(call say,NVCC,$<)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(NVCC) $(NVCCFLAGS) -Icuda -c -o $@ $<

$(BUILD)/obj/tests/gpu/test-gpu-copy.o: tests/gpu/test-gpu-copy.c cuda/gpu-copy.h
	$(call say,CC,$<)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -std=gnu11 $(OPT) -D_GNU_SOURCE -MMD -MP $(WARN) $(EXTRA_CFLAGS) $(CUDA_CFLAGS) -c -o $@ $<

$(BUILD)/obj/cuda/b10-gpubench.o: cuda/b10-gpubench.c cuda/gpu-copy.h
	$(call say,CC,$<)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -std=gnu11 $(OPT) -D_GNU_SOURCE -MMD -MP $(WARN) $(EXTRA_CFLAGS) $(CUDA_CFLAGS) -c -o $@ $<

$(GPU_TEST): $(BUILD)/obj/tests/gpu/test-gpu-copy.o $(CUDA_OBJS)
	$(call say,LD,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS_ALL) $(CUDA_LIBS) -lm

$(GPU_BENCH): $(BUILD)/obj/cuda/b10-gpubench.o $(CUDA_OBJS)
	$(call say,LD,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS_ALL) $(CUDA_LIBS) -lm

.PHONY: gpu
gpu: $(GPU_BIN)

endif
