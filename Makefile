# Installs mcplug for C and C++ hosts under a prefix (cargo-c is not on these machines, and its
# build of cargo itself would cost more than this whole project):
#
#   make install PREFIX=/usr/local        # or PREFIX=$HOME/.local, DESTDIR=... for packaging
#   make uninstall PREFIX=/usr/local
#
# What it installs:
#   $(LIBDIR)/libmcplug.so.$(VERSION)      soname libmcplug.so.0; links libmcplug.so.0 and libmcplug.so
#   $(LIBDIR)/libmcplug_schema.so          the JSON Schema validators libmcplug loads from beside itself
#   $(LIBDIR)/.debug/*.debug               their debug info, apart (found by gdb through .gnu_debuglink)
#   $(INCLUDEDIR)/mcplug.h
#   $(LIBDIR)/pkgconfig/mcplug.pc          pkg-config --cflags --libs mcplug
#   $(LIBDIR)/cmake/mcplug/                find_package(mcplug) -> target mcplug::mcplug
#
# The libraries are built in target/install (release, with the soname): the first install builds
# every dependency once more (a few minutes), since target/release's libmcplug.so has no soname —
# the tests, benches and bindings load or link that one by its path.

PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DESTDIR ?=
CARGO ?= cargo

VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
MAJOR := $(firstword $(subst ., ,$(VERSION)))
SONAME := libmcplug.so.$(MAJOR)
BUILT := target/install/release
STAGE := target/install/stage

.PHONY: all install uninstall

all: $(STAGE)/libmcplug.so.$(VERSION)

$(STAGE)/libmcplug.so.$(VERSION): FORCE
	$(CARGO) rustc --release --lib --crate-type cdylib -p mcplug --target-dir target/install \
		-- -C link-arg=-Wl,-soname,$(SONAME)
	$(CARGO) build --release -p mcplug-schema --target-dir target/install
	mkdir -p $(STAGE)
	cp $(BUILT)/libmcplug.so $(STAGE)/libmcplug.so.$(VERSION)
	cp $(BUILT)/libmcplug_schema.so $(STAGE)/libmcplug_schema.so
	cd $(STAGE) && for f in libmcplug.so.$(VERSION) libmcplug_schema.so; do \
		objcopy --only-keep-debug $$f $$f.debug && \
		strip --strip-debug --strip-unneeded $$f && \
		objcopy --add-gnu-debuglink=$$f.debug $$f || exit 1; \
	done

FORCE:

install: all
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(LIBDIR)/.debug $(DESTDIR)$(INCLUDEDIR) \
		$(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(LIBDIR)/cmake/mcplug
	install -m 0755 $(STAGE)/libmcplug.so.$(VERSION) $(STAGE)/libmcplug_schema.so $(DESTDIR)$(LIBDIR)/
	install -m 0644 $(STAGE)/libmcplug.so.$(VERSION).debug $(STAGE)/libmcplug_schema.so.debug \
		$(DESTDIR)$(LIBDIR)/.debug/
	ln -sf libmcplug.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libmcplug.so
	install -m 0644 include/mcplug.h $(DESTDIR)$(INCLUDEDIR)/mcplug.h
	printf '%s\n' \
		'prefix=$(PREFIX)' \
		'libdir=$(LIBDIR)' \
		'includedir=$(INCLUDEDIR)' \
		'' \
		'Name: mcplug' \
		'Description: An MCP (Model Context Protocol) client behind a small C ABI' \
		'Version: $(VERSION)' \
		'Libs: -L$${libdir} -lmcplug' \
		'Cflags: -I$${includedir}' \
		> $(DESTDIR)$(LIBDIR)/pkgconfig/mcplug.pc
	printf '%s\n' \
		'# mcplug $(VERSION): find_package(mcplug) gives the imported target mcplug::mcplug.' \
		'if(NOT TARGET mcplug::mcplug)' \
		'  add_library(mcplug::mcplug SHARED IMPORTED)' \
		'  set_target_properties(mcplug::mcplug PROPERTIES' \
		'    IMPORTED_LOCATION "$(LIBDIR)/libmcplug.so.$(VERSION)"' \
		'    IMPORTED_SONAME "$(SONAME)"' \
		'    INTERFACE_INCLUDE_DIRECTORIES "$(INCLUDEDIR)")' \
		'endif()' \
		'set(mcplug_FOUND TRUE)' \
		> $(DESTDIR)$(LIBDIR)/cmake/mcplug/mcplug-config.cmake
	printf '%s\n' \
		'# Compatible: the same major version (for 0.x, the same minor), not older than asked.' \
		'set(PACKAGE_VERSION "$(VERSION)")' \
		'set(PACKAGE_VERSION_COMPATIBLE FALSE)' \
		'set(PACKAGE_VERSION_EXACT FALSE)' \
		'string(REPLACE "." ";" _mcplug_v "$${PACKAGE_VERSION}")' \
		'list(GET _mcplug_v 0 _mcplug_major)' \
		'list(GET _mcplug_v 1 _mcplug_minor)' \
		'if(NOT PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION' \
		'   AND PACKAGE_FIND_VERSION_MAJOR EQUAL _mcplug_major' \
		'   AND (NOT _mcplug_major EQUAL 0 OR PACKAGE_FIND_VERSION_MINOR EQUAL _mcplug_minor))' \
		'  set(PACKAGE_VERSION_COMPATIBLE TRUE)' \
		'endif()' \
		'if(PACKAGE_FIND_VERSION VERSION_EQUAL PACKAGE_VERSION)' \
		'  set(PACKAGE_VERSION_EXACT TRUE)' \
		'endif()' \
		> $(DESTDIR)$(LIBDIR)/cmake/mcplug/mcplug-config-version.cmake

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libmcplug.so $(DESTDIR)$(LIBDIR)/$(SONAME) \
		$(DESTDIR)$(LIBDIR)/libmcplug.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libmcplug_schema.so \
		$(DESTDIR)$(LIBDIR)/.debug/libmcplug.so.$(VERSION).debug \
		$(DESTDIR)$(LIBDIR)/.debug/libmcplug_schema.so.debug \
		$(DESTDIR)$(INCLUDEDIR)/mcplug.h $(DESTDIR)$(LIBDIR)/pkgconfig/mcplug.pc \
		$(DESTDIR)$(LIBDIR)/cmake/mcplug/mcplug-config.cmake \
		$(DESTDIR)$(LIBDIR)/cmake/mcplug/mcplug-config-version.cmake
	-rmdir $(DESTDIR)$(LIBDIR)/cmake/mcplug $(DESTDIR)$(LIBDIR)/.debug 2>/dev/null
