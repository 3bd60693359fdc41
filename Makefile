# b10d — KV-cache transfer daemon. Plain make; `make help` lists the targets.
#
#   make            build everything into build/ (SAN=1: into build/san with ASan+UBSan)
#   make demo       two daemons move one request's KV between two ranks
#   make check      unit, integration and fault tests, then again under ASan+UBSan
#                   (T=NAME: one of them: test-plan, integ/restart, python/test_x;
#                   J=N: N tests at once, 3 by default)
#   make check-stress  the plain build's tests with two busy loops beside them
#   make check-threads  the unit tests of threaded rooms under ThreadSanitizer
#   make coverage  the unit tests' line coverage of daemon/, into tests/unit/COVERAGE.md
#   make soak       the long runs kept out of check (S=seconds of faults, 60)
#   make chaos      12 daemons in network namespaces under a nemesis, checked from the
#                   ranks' memory (SECS=60 of faults, SEED=, NODES=12, BREAK=rule; root)
#   make bench      WRITEs against their ceilings, and b10's nixl and mooncake modules
#                   beside the real NIXL and Mooncake, into tests/bench/RESULTS.md
#                   (B10_BENCH_ONLY=libs: the latter alone)
#   make fuzz-ucx   UCX's own wire, fuzzed as a key holder (S=seconds)
#   make python-wheel  the wheels of client/*/pyproject.toml (b10 with libb10), in build/python
#   make man        the man pages' option and command lists, from the programs' tables
#   make install    PREFIX=/usr/local DESTDIR= (binaries, library, header, pkg-config,
#                   man pages, systemd units, sysusers.d, /etc/default/b10d)
#   V=1             show the commands

PREFIX  ?= /usr/local
DESTDIR ?=
BINDIR  ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
LIBDIR  ?= $(PREFIX)/lib
INCDIR  ?= $(PREFIX)/include
MANDIR  ?= $(PREFIX)/share/man
UNITDIR ?= $(PREFIX)/lib/systemd/system
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
SYSCONFDIR  ?= /etc

CC      ?= cc
PKGS    := ucx libuv libprotobuf-c libsystemd libsodium libxxhash libcrypto
SAN     ?= 0

ifeq ($(SAN),1)
BUILD   ?= build/san
OPT     ?= -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
SANLD   := -fsanitize=address,undefined
else
BUILD   ?= build
OPT     ?= -O2 -g
SANLD   :=
endif

ifeq ($(V),1)
Q :=
say :=
else
Q := @
say = @printf '  %-7s %s\n' $(1) $(2);
endif

# pkg-config is asked only when building, so that `make deps` works on a bare machine.
# Foreign headers come in as system headers: their warnings are not ours to fail on
# (UCX 1.22's compiler_def.h trips -Wsign-compare). PKG_CONFIG_PATH picks another
# UCX (daemon/SECURITY.md, "Below the envelope").
PKG_CFLAGS = $(patsubst -I%,-isystem %,$(shell pkg-config --cflags $(PKGS) 2>/dev/null))
# A UCX outside the system's library directories is found at run time through an rpath,
# so that every process started from the build (under systemd, by socket activation, in
# the tests' clean environments) runs on the UCX it was built against.
comma      := ,
UCX_LIBDIR  = $(shell pkg-config --variable=libdir ucx 2>/dev/null)
UCX_RPATH   = $(if $(filter /usr/lib% /lib%,$(UCX_LIBDIR)),,$(if $(UCX_LIBDIR),-Wl$(comma)-rpath$(comma)$(UCX_LIBDIR)))
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null) $(UCX_RPATH)

GEN      := $(BUILD)/gen
WARN     := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -Wstrict-prototypes -Wmissing-prototypes
# daemon/ has a folder a layer (scripts/layers.py): base io mem link engine node, the
# daemon as a whole at the top. Headers are named without their folder.
DAEMON_DIRS := daemon daemon/base daemon/io daemon/mem daemon/link daemon/engine daemon/node
BASEFLAGS = -std=gnu11 $(OPT) -fPIC -D_GNU_SOURCE -MMD -MP -Iproto -I$(GEN) -Iclient/include \
            $(addprefix -I,$(DAEMON_DIRS)) $(PKG_CFLAGS)
CFLAGS_OURS = $(BASEFLAGS) $(WARN) $(EXTRA_CFLAGS)
LDFLAGS_ALL = $(SANLD) $(EXTRA_LDFLAGS)

# ---------------------------------------------------------------- sources

PROTOS      := $(wildcard proto/*.proto)
GEN_SRCS    := $(patsubst proto/%.proto,$(GEN)/%.pb-c.c,$(PROTOS))
GEN_HDRS    := $(GEN_SRCS:.c=.h)
GEN_OBJS    := $(patsubst %.c,%.o,$(GEN_SRCS))
COMMON_SRCS := proto/frame.c client/status.c
DAEMON_SRCS := $(filter-out daemon/main.c,$(foreach d,$(DAEMON_DIRS),$(wildcard $(d)/*.c)))
LIB_SRCS    := client/libb10.c client/vram.c
CTL_SRCS    := $(wildcard client/b10ctl.c)
EXAMPLES    := $(wildcard client/examples/*.c)
UNIT_SRCS   := $(wildcard tests/unit/test-*.c)
INTEG_SRCS  := $(wildcard tests/integ/*.c)
FAULT_SRCS  := $(wildcard tests/fault/*.c)
FUZZ_SRCS   := $(wildcard tests/fuzz/fuzz-*.c)
BENCH_SRCS  := $(wildcard tests/bench/*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

COMMON_OBJS := $(call obj,$(COMMON_SRCS)) $(GEN_OBJS)
DAEMON_OBJS := $(call obj,$(DAEMON_SRCS))
DAEMON_LIB  := $(BUILD)/lib/libb10d.a

SONAME      := libb10.so.1
LIB_SO      := $(BUILD)/lib/$(SONAME)

B10D        := $(BUILD)/bin/b10d
B10CTL      := $(if $(CTL_SRCS),$(BUILD)/bin/b10ctl)
EXAMPLE_BIN := $(patsubst client/examples/%.c,$(BUILD)/bin/%,$(EXAMPLES))
UNIT_BIN    := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
INTEG_BIN   := $(patsubst tests/integ/%.c,$(BUILD)/tests/%,$(INTEG_SRCS))
FAULT_BIN   := $(patsubst tests/fault/%.c,$(BUILD)/tests/%,$(FAULT_SRCS))
BENCH_BIN   := $(patsubst tests/bench/%.c,$(BUILD)/tests/%,$(BENCH_SRCS))

# The CUDA backend and kernels: cuda/cuda.mk sets CUDA_OBJS, CUDA_LIBS,
# CUDA_CFLAGS and GPU test binaries when nvcc is found, and says so when not.
CUDA_OBJS :=
CUDA_LIBS :=
CUDA_CFLAGS :=
GPU_BIN :=
-include cuda/cuda.mk

ALL := $(B10D) $(LIB_SO) $(B10CTL) $(EXAMPLE_BIN) $(UNIT_BIN) $(INTEG_BIN) $(FAULT_BIN) $(BENCH_BIN) \
       $(GPU_BIN)

# Keep intermediate objects and generated code: otherwise make deletes and rebuilds them every run.
.SECONDARY:
.PHONY: all deps deps-test demo check check-stress check-threads coverage soak chaos fuzz-ucx check-run check-san bench install uninstall clean help python-wheel man
all: $(ALL)

help:
	@sed -n '1,20p' Makefile | sed 's/^# \{0,1\}//'

deps:
	$(Q)sh scripts/deps.sh

deps-test:
	$(Q)sh scripts/deps.sh --test

# ---------------------------------------------------------------- rules

$(GEN)/%.pb-c.c $(GEN)/%.pb-c.h: proto/%.proto
	$(call say,PROTOC,$<)
	$(Q)mkdir -p $(GEN)
	$(Q)protoc-c --c_out=$(GEN) -Iproto $<

# Generated code is not ours: compiled without -Werror.
$(GEN)/%.pb-c.o: $(GEN)/%.pb-c.c | $(GEN_HDRS)
	$(call say,CC,$<)
	$(Q)$(CC) $(BASEFLAGS) -c -o $@ $<

$(BUILD)/obj/%.o: %.c | $(GEN_HDRS)
	$(call say,CC,$<)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) $(CFLAGS_OURS) $(CUDA_CFLAGS) -c -o $@ $<

# XXH3's AVX2 path, for the CPUs that have it (checksum.c asks at run time).
ifeq ($(shell uname -m),x86_64)
$(call obj,daemon/base/checksum-avx2.c): CFLAGS_OURS += -mavx2
endif

$(DAEMON_LIB): $(DAEMON_OBJS) $(CUDA_OBJS) $(COMMON_OBJS)
	$(call say,AR,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(B10D): $(call obj,daemon/main.c) $(DAEMON_LIB)
	$(call say,LD,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS_ALL) $(PKG_LIBS) $(CUDA_LIBS) -lm

$(LIB_SO): $(call obj,$(LIB_SRCS)) $(COMMON_OBJS) client/libb10.sym
	$(call say,LD,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=client/libb10.sym \
		-o $@ $(filter %.o,$^) $(LDFLAGS_ALL) -lprotobuf-c -ldl -lpthread
	$(Q)ln -sf $(SONAME) $(BUILD)/lib/libb10.so

LINK_LIBB10 = -L$(BUILD)/lib -lb10 -Wl,-rpath,'$$ORIGIN/../lib'

# b10ctl writes its --help and man page entries as b10d does (daemon/base/optdoc.c).
$(BUILD)/bin/b10ctl: $(call obj,$(CTL_SRCS) daemon/base/optdoc.c) $(LIB_SO) $(COMMON_OBJS)
	$(call say,LD,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $(filter %.o,$^) $(LDFLAGS_ALL) $(LINK_LIBB10) -lprotobuf-c

$(BUILD)/bin/%: $(BUILD)/obj/client/examples/%.o $(LIB_SO)
	$(call say,LD,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $< $(LDFLAGS_ALL) $(LINK_LIBB10) -lm

# Unit tests link the module under test from the daemon archive.
$(BUILD)/tests/test-%: $(BUILD)/obj/tests/unit/test-%.o $(DAEMON_LIB)
	$(call say,LD,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $^ $(LDFLAGS_ALL) $(UNIT_LDFLAGS) $(PKG_LIBS) $(CUDA_LIBS) -lcmocka -lm

# test-tags and test-quarantine make their allocations fail on purpose.
$(BUILD)/tests/test-tags: UNIT_LDFLAGS := -Wl,--wrap=calloc
$(BUILD)/tests/test-quarantine: UNIT_LDFLAGS := -Wl,--wrap=calloc
# test-cpuload gives cpuload.c a /proc/loadavg of its own.
$(BUILD)/tests/test-cpuload: UNIT_LDFLAGS := -Wl,--wrap=open -Wl,--wrap=read -Wl,--wrap=close
# test-copy runs device parts without a GPU: the GPU room's entry points are its fakes.
$(BUILD)/tests/test-copy: UNIT_LDFLAGS := $(foreach f,present kernels one_submission copy_job sum_job,\
	-Wl,--wrap=gpu_$(f))
# test-vram opens VRAM registrations without a GPU: the CUDA library's mapping calls are its fakes.
$(BUILD)/tests/test-vram: UNIT_LDFLAGS := $(foreach f,device_count device_by_pci map_ipc map_fd unmap,\
	-Wl,--wrap=gpu_copy_$(f))
# test-gpu cuts copy jobs into submissions without a GPU: the CUDA library's entry points are its
# fakes; and it sees every wake-up of the loop (none on a closed handle).
$(BUILD)/tests/test-gpu: UNIT_LDFLAGS := $(foreach f,device_count device_mps device_host_pointers \
	create destroy submit op_poll op_elapsed_ms op_sums op_release last_error,-Wl,--wrap=gpu_copy_$(f)) \
	-Wl,--wrap=uv_async_send
# test-xfer watches the failure funnel retire ids and cancel wire operations.
$(BUILD)/tests/test-xfer: UNIT_LDFLAGS := -Wl,--wrap=quarantine_add -Wl,--wrap=wire_cancel \
	-Wl,--wrap=tags_quarantine -Wl,--wrap=wire_mem_map -Wl,--wrap=wire_mem_unmap
# test-xfer-recv plays the sending daemon: the wire's receives and the link's messages are its
# fakes, and so are the quarantine and who holds a name (tests/unit/ranks.h).
$(BUILD)/tests/test-xfer-recv: UNIT_LDFLAGS := $(foreach f,wire_recv wire_recv_bulk wire_cancel \
	wire_progress_ns wire_mem_map wire_mem_unmap peer_send peer_send_result peer_open \
	quarantine_add quarantine_bytes names_holder,-Wl,--wrap=$(f))
# test-ask asks, and answers, over a link of fakes (tests/unit/ranks.h for the ranks).
$(BUILD)/tests/test-ask: UNIT_LDFLAGS := $(foreach f,wire_recv wire_cancel peer_send_result \
	peer_send_packed peer_ensure_link peer_open names_holder,-Wl,--wrap=$(f))
# test-access: who holds a name on this node is its table (tests/unit/ranks.h).
$(BUILD)/tests/test-access: UNIT_LDFLAGS := -Wl,--wrap=names_holder
# test-session drives session.c as a rank and as the engine do: the client socket, the UCX
# address, the mapping of memory, remote daemons and the engine's entry points are its fakes.
$(BUILD)/tests/test-session: UNIT_LDFLAGS := $(foreach f,ipc_send ipc_send_notice ipc_notice_bytes \
	ipc_conn_take_fd ipc_conn_resume wire_address mem_region_open peer_get peer_ref peer_unref \
	peer_ensure_link xfer_fail xfer_cancel xfer_local_forget_rank xfer_settle_forget ask_detach,\
	-Wl,--wrap=$(f))

# The link rooms' tests run on a wire of fakes and count what the quarantine is given
# (tests/unit/peer-fixture.h).
PEER_WRAPS := $(foreach f,ep_create ep_close ep_set_user ep_transports ep_lanes address send_owned,\
	-Wl,--wrap=wire_$(f)) -Wl,--wrap=quarantine_add -Wl,--wrap=staging_view_bytes
$(addprefix $(BUILD)/tests/,test-peer test-peer-hello test-peer-liveness test-peer-dispatch): \
	UNIT_LDFLAGS := $(PEER_WRAPS)

# The engine's role tests run on a wire and link rooms of fakes, and keep the log
# (tests/unit/engine-fixture.h).
ENGINE_WRAPS := $(foreach f,send recv send_bulk recv_bulk cancel progress_ns mem_map mem_unmap,\
	-Wl,--wrap=wire_$(f)) $(foreach f,send open use hold release heard liveness_check \
	send_result link_why refused is_self,-Wl,--wrap=peer_$(f)) \
	-Wl,--wrap=log_write -Wl,--wrap=log_write_fields
$(addprefix $(BUILD)/tests/,test-xfer-send test-xfer-read): UNIT_LDFLAGS := $(ENGINE_WRAPS)
# test-xfer-local runs the GPU's grid copies without one: the GPU room's entry points are its fakes.
$(BUILD)/tests/test-xfer-local: UNIT_LDFLAGS := $(ENGINE_WRAPS) \
	$(foreach f,present kernels copy_job,-Wl,--wrap=gpu_$(f))
# test-admin answers b10ctl from such a daemon: the client socket and the service are its fakes.
$(BUILD)/tests/test-admin: UNIT_LDFLAGS := $(ENGINE_WRAPS) -Wl,--wrap=wire_ep_transports \
	$(foreach f,send conn_in_group,-Wl,--wrap=ipc_$(f)) \
	$(foreach f,info drain resume,-Wl,--wrap=service_$(f))

# Integration test programs are clients of libb10 (or raw speakers of its protocols).
$(BUILD)/tests/%: $(BUILD)/obj/tests/integ/%.o $(LIB_SO) $(DAEMON_LIB)
	$(call say,LD,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $< $(DAEMON_LIB) $(LDFLAGS_ALL) $(LINK_LIBB10) $(PKG_LIBS) $(CUDA_LIBS) -lm

# Fault test programs (a rogue peer): the same, from tests/fault.
$(BUILD)/tests/%: $(BUILD)/obj/tests/fault/%.o $(LIB_SO) $(DAEMON_LIB)
	$(call say,LD,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $< $(DAEMON_LIB) $(LDFLAGS_ALL) $(FAULT_LDFLAGS) $(LINK_LIBB10) $(PKG_LIBS) \
		$(CUDA_LIBS) -lm

# The rogue presents node proofs b10d would not load (-f): its proof's two sources are its own.
$(BUILD)/tests/b10-rogue: FAULT_LDFLAGS := -Wl,--wrap=nodeid_chain_of -Wl,--wrap=nodeid_sign

# The bench client (tests/bench): a client of libb10 alone. Static pattern: it
# takes these binaries before the integration and fault rules could.
$(BENCH_BIN): $(BUILD)/tests/%: $(BUILD)/obj/tests/bench/%.o $(LIB_SO)
	$(call say,LD,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(CC) -o $@ $< $(LDFLAGS_ALL) $(LINK_LIBB10) -lpthread -ldl -lm

# ---------------------------------------------------------------- jobs

# Only what the demo runs: the daemon, libb10 and the rank program (not the tests).
demo: deps
	$(Q)$(MAKE) --no-print-directory $(B10D) $(LIB_SO) $(B10CTL) $(BUILD)/bin/b10-kvrank
	$(Q)BUILD=$(BUILD) sh scripts/demo.sh

# J: how many tests run at once (scripts/check.sh, B10_CHECK_JOBS).
CHECK_JOBS = $(if $(J),B10_CHECK_JOBS=$(J))

check: deps-test
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(MAKE) --no-print-directory SAN=1 all
	$(Q)$(CHECK_JOBS) B10_CHECK_ONLY=$(T) sh scripts/check.sh build build/san

# The suite on a loaded machine: what passes only when the cores are idle fails here.
check-stress: deps-test
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(CHECK_JOBS) B10_CHECK_HOG=2 B10_CHECK_ONLY=$(T) sh scripts/check.sh build

# The unit tests of rooms with threads of their own (gpu.c's feed threads, test-gpu's
# stress test) under ThreadSanitizer, in a folder of their own; not part of check, as
# TSan's shadow memory does not start under every kernel's address-space layout.
# UCX's memory hooks stay out of its way.
TSAN_BUILD := build/tsan
TSAN_TESTS := test-gpu test-names-file
check-threads: deps-test
	$(Q)$(MAKE) --no-print-directory SAN=0 BUILD=$(TSAN_BUILD) OPT='-O1 -g' \
		EXTRA_CFLAGS=-fsanitize=thread EXTRA_LDFLAGS=-fsanitize=thread \
		$(addprefix $(TSAN_BUILD)/tests/,$(TSAN_TESTS))
	$(Q)for t in $(TSAN_TESTS); do \
		UCX_MEM_EVENTS=no UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no \
		TSAN_OPTIONS=halt_on_error=1 $(TSAN_BUILD)/tests/$$t || exit 1; done

# The soaks (each runner's soak_scenarios), too long for check: on the plain build.
soak: deps-test
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(CHECK_JOBS) B10_CHECK_SOAK=1 B10_SOAK_S=$(or $(S),60) sh scripts/check.sh build

# A cluster in a box (tests/chaos/chaos.py): NODES daemons (12), each in a network namespace
# of its own with the shipped unit's flags, ranks through libb10 and the NIXL module, a seeded
# nemesis for SECS seconds (60), a checker that reads the ranks' memory and the history; its
# history, summary and timeline go to build/chaos/seed-SEED. BREAK= breaks one rule on
# purpose (late-write, spill-byte, drop-reason, flip-data, long-stop, no-heal, quarantine,
# bounds): the run must then stop with that violation. On the plain build, as root.
chaos: deps-test
	$(Q)$(MAKE) --no-print-directory SAN=0 all
	$(Q)$${B10_PYTHON:-/usr/bin/python3} tests/chaos/chaos.py --build build --secs $(or $(SECS),60) \
		--nodes $(or $(NODES),12) $(if $(SEED),--seed $(SEED)) $(if $(BREAK),--break $(BREAK))

# What the unit tests run of the daemon: the daemon and tests/unit built with gcov's
# counters (-O0, so that a line is a line) into a folder of their own, the tests run
# once, and the lines run printed per file of daemon/, per folder and in all.
COV_BUILD := build/cov
coverage: deps
	$(Q)$(MAKE) --no-print-directory SAN=0 BUILD=$(COV_BUILD) OPT='-O0 -g --coverage' \
		EXTRA_LDFLAGS=--coverage $(COV_BUILD)/bin/b10d \
		$(patsubst tests/unit/%.c,$(COV_BUILD)/tests/%,$(UNIT_SRCS))
	$(Q)sh scripts/coverage.sh $(COV_BUILD)

# UCX's own wire, fuzzed as a key holder would send it (tests/fuzz/ucx-wire.py): not part of
# check, since no UCX at hand survives it (daemon/SECURITY.md, "Below the envelope"); check
# runs it as a stranger, whom the gate keeps out (fault/ucx_wire). S: seconds.
fuzz-ucx: all
	$(Q)python3 tests/fuzz/ucx-wire.py $(BUILD) $(or $(S),30) holder

check-run: all
	$(Q)sh scripts/check.sh $(BUILD)

# One wheel per Python distribution (client/*/pyproject.toml), offline; libb10 is
# all of the build they carry.
python-wheel: $(LIB_SO)
	$(Q)BUILD=$(BUILD) sh scripts/python-wheel.sh

# b10d(8)'s OPTIONS and b10ctl(8)'s COMMANDS and OPTIONS are what the option tables say
# (daemon/base/config-table.c, client/b10ctl.c): rewritten here, checked by ops/man_options.
man: $(B10D) $(B10CTL)
	$(Q)python3 scripts/man-sections.py $(B10D) $(B10CTL)

bench: deps-test
	$(Q)$(MAKE) --no-print-directory all
	$(Q)BUILD=$(BUILD) sh scripts/bench.sh

# ---------------------------------------------------------------- install

# /etc/default/b10d is the operator's once it exists: never overwritten.
install: $(B10D) $(LIB_SO) $(B10CTL)
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCDIR)/b10
	install -m 0755 $(B10D) $(DESTDIR)$(SBINDIR)/b10d
	$(if $(B10CTL),install -d $(DESTDIR)$(BINDIR) && install -m 0755 $(B10CTL) $(DESTDIR)$(BINDIR)/b10ctl)
	install -m 0755 $(LIB_SO) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libb10.so
	install -m 0644 client/include/b10/b10.h $(DESTDIR)$(INCDIR)/b10/b10.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCDIR@|$(INCDIR)|' \
		client/b10.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/b10.pc
	install -d $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSUSERSDIR) \
		$(DESTDIR)$(SYSCONFDIR)/default
	install -m 0644 daemon/b10d.8 client/b10ctl.8 $(DESTDIR)$(MANDIR)/man8/
	sed -e 's|/usr/sbin/b10d|$(SBINDIR)/b10d|' -e 's|/etc/default/b10d|$(SYSCONFDIR)/default/b10d|' \
		systemd/b10d.service > $(DESTDIR)$(UNITDIR)/b10d.service
	install -m 0644 systemd/b10d.socket $(DESTDIR)$(UNITDIR)/b10d.socket
	install -d $(DESTDIR)$(SYSCONFDIR)/systemd/system/b10d.service.d
	install -m 0644 systemd/b10d-network.conf \
		$(DESTDIR)$(SYSCONFDIR)/systemd/system/b10d.service.d/network.conf.example
	install -m 0644 systemd/b10d-metrics.conf \
		$(DESTDIR)$(SYSCONFDIR)/systemd/system/b10d.service.d/metrics.conf.example
	install -m 0644 systemd/b10d-devices.conf \
		$(DESTDIR)$(SYSCONFDIR)/systemd/system/b10d.service.d/devices.conf.example
	install -m 0644 systemd/b10d-gate-caps.conf \
		$(DESTDIR)$(SYSCONFDIR)/systemd/system/b10d.service.d/gate-caps.conf.example
	install -m 0644 systemd/b10d-cpus.conf \
		$(DESTDIR)$(SYSCONFDIR)/systemd/system/b10d.service.d/cpus.conf.example
	install -d $(DESTDIR)$(PREFIX)/share/b10d
	install -m 0644 systemd/b10d-dashboard.json $(DESTDIR)$(PREFIX)/share/b10d/grafana-dashboard.json
	install -m 0644 systemd/b10d.sysusers $(DESTDIR)$(SYSUSERSDIR)/b10d.conf
	[ -e $(DESTDIR)$(SYSCONFDIR)/default/b10d ] || \
		install -m 0644 systemd/b10d.env $(DESTDIR)$(SYSCONFDIR)/default/b10d

uninstall:
	rm -f $(DESTDIR)$(SBINDIR)/b10d $(DESTDIR)$(BINDIR)/b10ctl $(DESTDIR)$(LIBDIR)/$(SONAME) \
		$(DESTDIR)$(LIBDIR)/libb10.so $(DESTDIR)$(INCDIR)/b10/b10.h $(DESTDIR)$(LIBDIR)/pkgconfig/b10.pc \
		$(DESTDIR)$(MANDIR)/man8/b10d.8 $(DESTDIR)$(MANDIR)/man8/b10ctl.8 \
		$(DESTDIR)$(UNITDIR)/b10d.service $(DESTDIR)$(UNITDIR)/b10d.socket \
		$(DESTDIR)$(SYSUSERSDIR)/b10d.conf \
		$(DESTDIR)$(SYSCONFDIR)/systemd/system/b10d.service.d/network.conf.example \
		$(DESTDIR)$(SYSCONFDIR)/systemd/system/b10d.service.d/metrics.conf.example \
		$(DESTDIR)$(SYSCONFDIR)/systemd/system/b10d.service.d/devices.conf.example \
		$(DESTDIR)$(SYSCONFDIR)/systemd/system/b10d.service.d/gate-caps.conf.example \
		$(DESTDIR)$(SYSCONFDIR)/systemd/system/b10d.service.d/cpus.conf.example \
		$(DESTDIR)$(PREFIX)/share/b10d/grafana-dashboard.json

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
