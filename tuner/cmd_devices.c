/* cmd_devices.c — `attntune devices`: every GPU with the facts a tuning result depends on. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "runtime/rt.h"
#include "tuner/cli.h"
#include "tuner/commands.h"

static const char USAGE[] =
    "usage: attntune devices [--help]\n"
    "\n"
    "Lists every CUDA GPU: name, compute capability and NVRTC target, SM count, memory, L2 size,\n"
    "shared memory per block, driver, NVRTC and cuDNN versions (the cuDNN that ATTNTUNE_CUDNN or\n"
    "the loader path selects). Exits 1 when no GPU or driver is present.\n";

static void print_versions(void)
{
  int major = 0, minor = 0;
  size_t cudnn = 0;
  const char *path = NULL;
  if (rt_nvrtc_version(&major, &minor) == AT_OK) printf("NVRTC     %d.%d\n", major, minor);
  else printf("NVRTC     unavailable: %s\n", at_last_error());
  if (rt_cudnn_version(&cudnn, &path) == AT_OK)
    printf("cuDNN     %zu.%zu.%zu (%s)\n", cudnn / 10000, (cudnn % 10000) / 100, cudnn % 100, path);
  else printf("cuDNN     unavailable: %s\n", at_last_error());
}

static void print_device(const rt_device_info *d)
{
  char arch[16];
  at_arch_for_cc(d->cc_major, d->cc_minor, arch);
  printf("GPU %d: %s\n", d->ordinal, d->name);
  printf("  compute capability  %d.%d (NVRTC target %s)\n", d->cc_major, d->cc_minor, arch);
  printf("  multiprocessors     %d\n", d->sm_count);
  printf("  memory              %.1f GiB\n", (double)d->total_mem / (1024.0 * 1024.0 * 1024.0));
  printf("  L2 cache            %.1f MiB\n", d->l2_bytes / (1024.0 * 1024.0));
  printf("  shared mem / block  %d KiB (opt-in), %d KiB per SM\n", d->smem_per_block_optin / 1024,
         d->smem_per_sm / 1024);
  printf("  registers / SM      %d\n", d->regs_per_sm);
  printf("  clocks              SM %d MHz, memory %d MHz, bus %d bits\n", d->clock_khz / 1000,
         d->mem_clock_khz / 1000, d->mem_bus_bits);
  printf("  PCI bus             %s\n", d->pci_bus_id);
}

int tn_cmd_devices(int argc, char **argv)
{
  static const struct option options[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
  int c, count = 0;
  opterr = 0;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
    if (c == 'h') {
      fputs(USAGE, stdout);
      return TN_EXIT_OK;
    }
    return tn_usage_error("devices", "unknown option '%s'", argv[optind - 1]);
  }
  if (optind < argc) return tn_usage_error("devices", "unexpected argument '%s'", argv[optind]);

  at_status rc = rt_device_count(&count);
  if (rc != AT_OK) return tn_fail_exit("devices", rc);
  if (count == 0) {
    fprintf(stderr, "attntune devices: no CUDA GPU found\n");
    return TN_EXIT_RUNTIME;
  }
  rt_device_info info;
  if ((rc = rt_device_query(0, &info)) != AT_OK) return tn_fail_exit("devices", rc);
  char release[64];
  rt_driver_release(release, sizeof release);
  printf("driver    %s (CUDA %d.%d)\n", release, info.driver_version / 1000,
         (info.driver_version % 1000) / 10);
  print_versions();
  for (int i = 0; i < count; i++) {
    if ((rc = rt_device_query(i, &info)) != AT_OK) return tn_fail_exit("devices", rc);
    print_device(&info);
  }
  return TN_EXIT_OK;
}
