// The raw capture the CUDA double's H200 is written from: what the driver itself answers for the
// attributes umem reads, straight through cuda.h (not through umem). Build: build.sh.
#include <cuda.h>

#include <cstdio>

int main() {
  if (cuInit(0) != CUDA_SUCCESS) {
    std::printf("cuInit failed\n");
    return 1;
  }
  int version = 0, count = 0;
  cuDriverGetVersion(&version);
  cuDeviceGetCount(&count);
  std::printf("cuDriverGetVersion %d\ncuDeviceGetCount %d\n", version, count);
  const struct {
    CUdevice_attribute id;
    const char* name;
  } attrs[] = {
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "MULTIPROCESSOR_COUNT"},
      {CU_DEVICE_ATTRIBUTE_INTEGRATED, "INTEGRATED"},
      {CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, "CAN_MAP_HOST_MEMORY"},
      {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, "UNIFIED_ADDRESSING"},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "COMPUTE_CAPABILITY_MAJOR"},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "COMPUTE_CAPABILITY_MINOR"},
      {CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, "MANAGED_MEMORY"},
      {CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED, "HOST_NATIVE_ATOMIC_SUPPORTED"},
      {CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, "PAGEABLE_MEMORY_ACCESS"},
      {CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, "CONCURRENT_MANAGED_ACCESS"},
      {CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM,
       "CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM"},
      {CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, "HOST_REGISTER_SUPPORTED"},
      {CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES,
       "PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES"},
      {CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST,
       "DIRECT_MANAGED_MEM_ACCESS_FROM_HOST"},
      {CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, "HOST_NUMA_ID"},
  };
  for (int d = 0; d < count; ++d) {
    CUdevice dev;
    cuDeviceGet(&dev, d);
    char name[256] = {}, bus[32] = {};
    size_t total = 0;
    CUuuid uuid{};
    cuDeviceGetName(name, sizeof name, dev);
    cuDeviceGetPCIBusId(bus, sizeof bus, dev);
    cuDeviceTotalMem(&total, dev);
    cuDeviceGetUuid_v2(&uuid, dev);
    std::printf("device %d name %s\ndevice %d pci_bus_id %s\ndevice %d total_mem %zu\n", d, name, d,
                bus, d, total);
    std::printf("device %d uuid ", d);
    for (int i = 0; i < 16; ++i) std::printf("%02x", static_cast<unsigned char>(uuid.bytes[i]));
    std::printf("\n");
    for (const auto& a : attrs) {
      int v = 0;
      const CUresult r = cuDeviceGetAttribute(&v, a.id, dev);
      if (r == CUDA_SUCCESS)
        std::printf("device %d attribute %d %s %d\n", d, static_cast<int>(a.id), a.name, v);
      else
        std::printf("device %d attribute %d %s error %d\n", d, static_cast<int>(a.id), a.name, r);
    }
  }
  return 0;
}
