// libudev stand-in for statically linked hwloc (UMEM_STATIC_TESTS only): Debian ships no
// libudev.a. hwloc asks udev only for optional disk attributes; udev_new() returning null makes
// it skip udev entirely, so the other entry points are never reached and only satisfy the linker.
struct udev;
struct udev_device;

extern "C" {

udev* udev_new() { return nullptr; }
udev* udev_unref(udev*) { return nullptr; }
udev_device* udev_device_new_from_subsystem_sysname(udev*, const char*, const char*) {
  return nullptr;
}
const char* udev_device_get_property_value(udev_device*, const char*) { return nullptr; }
udev_device* udev_device_unref(udev_device*) { return nullptr; }

}  // extern "C"
