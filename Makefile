# hxstate: agent state in PostgreSQL

EXTENSION = hxstate
MODULE_big = hxstate
OBJS = \
	src/backfill.o \
	src/catalog.o \
	src/chunk.o \
	src/compress.o \
	src/decode.o \
	src/detoast.o \
	src/diff.o \
	src/doc.o \
	src/emit.o \
	src/encode.o \
	src/equal.o \
	src/gc.o \
	src/eventlog.o \
	src/guard.o \
	src/history.o \
	src/hxstate.o \
	src/merge.o \
	src/message.o \
	src/names.o \
	src/ops.o \
	src/patch.o \
	src/phase.o \
	src/send.o \
	src/snapshot.o \
	src/pointer.o \
	src/step.o \
	src/store.o \
	src/stream.o \
	src/tree.o \
	src/trigger.o

DATA = \
	sql/hxstate--0.1.0.sql \
	sql/hxstate--0.1.0--0.2.0.sql \
	sql/hxstate--0.2.0--0.3.0.sql \
	sql/hxstate--0.3.0--0.4.0.sql \
	sql/hxstate--0.4.0--0.5.0.sql \
	sql/hxstate--0.5.0--0.6.0.sql \
	sql/hxstate--0.6.0.sql \
	sql/hxstate--0.6.0--0.7.0.sql \
	sql/hxstate--0.7.0.sql

REGRESS = setup patch merge diff compress limits guard phase stream names send logcache argcache runs store store_abuse migrate security searchpath steps replay sessions upgrade store_defects probe7a decode
REGRESS_OPTS = --inputdir=test --load-extension=hxstate

ISOLATION = patch-test-race merge-parallel guard-races machine-cache stream-notify notify-hint stream-send stream-emit store-concurrent store-migrate store-delete store-gc-race store-decoding step-promote upgrade-rename extension-cache trigger-cache log-indexes
ISOLATION_OPTS = --load-extension=hxstate --inputdir=test/isolation \
	--outputdir=test/isolation/output

PG_CONFIG ?= pg_config
# The catalog cache on pg_extension (EXTENSIONOID), which PostgreSQL 18 has
# and the minor releases of 15 to 17 since early 2026 added at the end of
# their list: src/catalog.c keeps what pg_extension says when the server
# has it.  (An enum member cannot be tested by the preprocessor.)  The
# list is in utils/syscache.h up to 16, in catalog/syscache_ids.h since 17.
HX_SERVER_INCLUDE := $(shell $(PG_CONFIG) --includedir-server)
ifneq ($(shell grep -s -l -w EXTENSIONOID '$(HX_SERVER_INCLUDE)/utils/syscache.h' '$(HX_SERVER_INCLUDE)/catalog/syscache_ids.h'),)
PG_CPPFLAGS += -DHX_HAVE_EXTENSIONOID
endif

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# hxdoc decompresses its segments itself (src/chunk.c) when the server has lz4
SHLIB_LINK += $(filter -llz4, $(LIBS))

EXTRA_CLEAN = test/isolation/output

# The PGXN distribution: dist/hxstate-<version>.zip, of the committed tree
# (git archive: what .gitattributes marks export-ignore stays out)
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(EXTENSION).control)

dist:
	mkdir -p dist
	git archive --format zip --prefix=$(EXTENSION)-$(EXTVERSION)/ \
		--output dist/$(EXTENSION)-$(EXTVERSION).zip HEAD

.PHONY: dist
