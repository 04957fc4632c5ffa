#include "app/options.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error_mpi.h"
#include "kernels/backend.h"

void options_print_help(void)
{
  printf(
      "Usage: stencil [options] INPUT.h5\n"
      "       mpirun -n P stencil [options] INPUT.h5\n"
      "\n"
      "Solves the explicit heat equation or the Poisson equation (Jacobi iteration) described\n"
      "by INPUT.h5 (docs/input-format.md) on a grid decomposed over the MPI ranks, and writes\n"
      "the final field to the output directory.\n"
      "\n"
      "Options:\n"
      "  --steps N            total number of time steps (default: /time/steps of the input);\n"
      "                       poisson: the most Jacobi iterations (/solver/max_iterations)\n"
      "  --tolerance X        poisson: stop when the residual norm ||f - L u|| <= X ||b||\n"
      "                       (b: f with the boundary data; 0 = run every iteration)\n"
      "                       (default: /solver/tolerance of the input)\n"
      "  --residual-every N   poisson: residual norm every N iterations (0 = only the final\n"
      "                       one; default: /solver/residual_every of the input)\n"
      "  --dims PxQxR         ranks along x, y and z (x fastest); 0 lets MPI choose an axis\n"
      "                       (default: MPI_Dims_create over all axes)\n"
      "  --backend B          cpu, cuda or auto (default auto: cuda when this build has it and\n"
      "                       every rank sees a GPU of its own, else cpu); cuda takes the GPU\n"
      "                       (node-local rank) mod (GPUs visible on the node)\n"
      "  --output-dir DIR     where output files go (default: /output/directory of the input)\n"
      "  --overwrite          replace existing output files (otherwise the run refuses to start)\n"
      "  --report-json FILE   also write the final report as JSON to FILE\n"
      "  --dry-run            validate, decompose, print per-rank sizes and memory, and exit\n"
      "  --allow-unstable     run even if dt exceeds the explicit stability limit\n"
      "  --check-every N      look for NaN/Inf every N steps (default 100; 0 = only at the end);\n"
      "                       a check's result is read at the next one, so the device never\n"
      "                       waits: a bad step is reported N steps later, with its number\n"
      "  --progress SECONDS   print a progress line at most this often (default 10; 0 = never)\n"
      "  --peak-bandwidth X   memory bandwidth for the report's \"%% of peak\": GB/s, or\n"
      "                       \"measure\" to time a STREAM-like triad (cpu) or a device copy\n"
      "                       (cuda) on every rank at start-up (default: not reported)\n"
      "  --kernel auto|1|2|3  cuda kernel tier: 1 plain global-memory reference, 2 tuned\n"
      "                       streaming kernel (radius 1), 3 fused kernel: T steps per\n"
      "                       launch, halos T cells deep exchanged once per launch (radius\n"
      "                       1; where it cannot run, the best other tier, with the reason in\n"
      "                       the header); auto (default) takes the best tier the problem\n"
      "                       allows (tier 3 only where it measured faster than tier 2)\n"
      "  --steps-per-launch T cuda tier 3: time steps fused per launch, 1 to 8 (default 0:\n"
      "                       chosen from the device); implies --kernel 3 under auto. Poisson\n"
      "                       with --residual-every <= T: lowered to the longest launch that\n"
      "                       sums residuals (2D: 4 in fp32, 5 in fp64)\n"
      "  --cluster-size N|CXxCY\n"
      "                       cuda tier 3: CTAs per thread-block cluster, N along x or CX x CY\n"
      "                       (3D), at most 16. 3D warp rows (default: one CTA, the fastest\n"
      "                       measured): CX is 1, or n_x / 128 where the cluster spans x\n"
      "                       (n_x a multiple of 128, x faces periodic or homogeneous on one\n"
      "                       rank); CY CTAs exchange rows through DSMEM. 3D only. Implies\n"
      "                       --kernel 3 under auto\n"
      "  --chunk N            cuda tier 3: planes (3D) or rows (2D) each CTA streams through\n"
      "                       (default 0: chosen from the device by a model of its waves of\n"
      "                       CTAs; 3D may then cut only some tiles into chunks, the header\n"
      "                       says \"by tile\"); implies --kernel 3 under auto. These three are\n"
      "                       refused with --backend cpu or --kernel 1|2, and ignored (with a\n"
      "                       note) when auto picks cpu\n"
      "  --overlap on|off|parts|signal\n"
      "                       cuda: update the shell and exchange halos while the inner box\n"
      "                       is updated on another stream (default on; tier 3: only 3D\n"
      "                       launches of blocks that send along z only, in the form a model\n"
      "                       of the launch picks: parts forces the sent planes first, then\n"
      "                       the rest; signal one launch that signals when the sent planes\n"
      "                       are stored, where the plan allows it); off serialises\n"
      "  --halo-transport T   cuda: how halos travel between GPUs: mpi-host (page-locked host\n"
      "                       buffers), mpi-device (CUDA-aware MPI only), ipc (CUDA IPC peer\n"
      "                       copies, ranks of one node), nccl, or auto (default: ipc when all\n"
      "                       neighbours share the node, else nccl, mpi-device, mpi-host)\n"
      "  --allow-gpu-sharing  cuda: let several ranks of a node share one GPU\n"
      "  --pdl on|off         cuda: programmatic dependent launch between successive kernels\n"
      "                       (default on)\n"

      "  --checkpoint-every N write a checkpoint every N steps (default 0: none)\n"
      "  --checkpoint-interval SECONDS\n"
      "                       also write one when this much wall time has passed since the\n"
      "                       last (default 0: never)\n"
      "  --keep-checkpoints K keep the newest K checkpoints (default 3; 0 keeps all)\n"
      "  --checkpoint-mode M  sync (default): the loop waits for each checkpoint write;\n"
      "                       background: the loop only copies the field to a host buffer\n"
      "                       and a thread writes it while the next steps run\n"
      "  --restart FILE|latest\n"
      "                       continue from a checkpoint (latest: the newest in the output\n"
      "                       directory) up to --steps total steps; later snapshots and\n"
      "                       checkpoints there are moved aside into superseded-*/\n"
      "  --output-every N     write a snapshot every N steps, listed in snapshots.xdmf\n"
      "                       (default 0: none)\n"
      "  --output-stride S    snapshots keep every S-th cell along each axis (default 1)\n"
      "  --walltime HH:MM:SS  checkpoint and stop (exit status 4) before this much wall time\n"
      "                       has passed since the start (also accepts seconds)\n"
      "  --agree-every N      steps between the ranks' non-blocking agreement on signals,\n"
      "                       --checkpoint-interval and --walltime (default 10)\n"
      "  --debug-checkpoint-delay SECONDS\n"
      "                       test only: pause this long inside every checkpoint write\n"
      "  --quiet              print only errors and warnings\n"
      "  --version            print the version and build configuration, and exit\n"
      "  --help               print this help and exit\n"
      "\n"
      "Exit status: 0 success, 1 error, 2 bad command line, 3 non-finite values in the field,\n"
      "4 stopped early by SIGUSR1, SIGTERM, SIGINT or --walltime after writing a checkpoint\n"
      "(continue with --restart latest).\n"
      "Set STENCIL_TRACEBACK=1 to print where an error travelled through the code.\n");
}

static int parse_int64(const char *opt, const char *s, int64_t min, int64_t *out)
{
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || !end || *end || end == s || v < min)
    FAIL0(STENCIL_ERR_USAGE, "%s expects an integer >= %lld, got \"%s\"", opt, (long long)min, s);
  *out = v;
  return STENCIL_OK;
}

static int parse_seconds(const char *opt, const char *s, double *out)
{
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || !end || *end || end == s || !(v >= 0) || v > 1e9)
    FAIL0(STENCIL_ERR_USAGE, "%s expects a number of seconds >= 0, got \"%s\"", opt, s);
  *out = v;
  return STENCIL_OK;
}

/* HH:MM:SS, MM:SS or seconds. */
static int parse_walltime(const char *s, double *out)
{
  long long part[3] = {0, 0, 0};
  int n = 0;
  const char *p = s;
  if (!strchr(s, ':'))
    return parse_seconds("--walltime", s, out);
  while (n < 3) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(p, &end, 10);
    if (errno || end == p || v < 0 || v > 1000000)
      break;
    part[n++] = v;
    if (*end == '\0') {
      p = end;
      break;
    }
    if (*end != ':')
      break;
    p = end + 1;
  }
  if (n < 2 || *p != '\0' || (n == 3 && (part[1] > 59 || part[2] > 59)) || (n == 2 && part[1] > 59))
    FAIL0(STENCIL_ERR_USAGE, "--walltime expects HH:MM:SS, MM:SS or seconds, got \"%s\"", s);
  *out =
      n == 3 ? (double)(part[0] * 3600 + part[1] * 60 + part[2]) : (double)(part[0] * 60 + part[1]);
  return STENCIL_OK;
}

/* --cluster-size: N (along x) or CXxCY; 0 = default. At most 16 CTAs in all. */
static int parse_cluster(const char *s, int c[2])
{
  int64_t v[2] = {0, 1};
  const char *x = strchr(s, 'x');
  char buf[64];
  if (strlen(s) >= sizeof buf)
    FAIL0(STENCIL_ERR_USAGE, "--cluster-size: \"%s\" is too long", s);
  strcpy(buf, s);
  if (x) {
    buf[x - s] = 0;
    if (!buf[0] || !x[1] || strchr(x + 1, 'x'))
      FAIL0(STENCIL_ERR_USAGE, "--cluster-size expects N or CXxCY (CTAs per cluster), got \"%s\"",
            s);
    CHECK(parse_int64("--cluster-size", buf, 1, &v[0]));
    CHECK(parse_int64("--cluster-size", x + 1, 1, &v[1]));
  } else {
    CHECK(parse_int64("--cluster-size", buf, 0, &v[0]));
    if (v[0] == 0)
      v[1] = 0;
  }
  if (v[0] > 16 || v[1] > 16 || v[0] * v[1] > 16)
    FAIL0(STENCIL_ERR_USAGE,
          "--cluster-size %s: a thread-block cluster has at most 16 CTAs (8 portable)", s);
  c[0] = (int)v[0];
  c[1] = (int)v[1];
  return STENCIL_OK;
}

static int parse_dims(const char *s, int dims[3])
{
  int64_t v[3] = {0, 0, 0};
  char buf[128];
  if (strlen(s) >= sizeof buf)
    FAIL0(STENCIL_ERR_USAGE, "--dims: \"%s\" is too long", s);
  strcpy(buf, s);
  char *save = NULL, *tok = strtok_r(buf, "x", &save);
  int n = 0;
  while (tok && n < 3) {
    CHECK(parse_int64("--dims", tok, 0, &v[n]));
    if (v[n] > 1 << 20)
      FAIL0(STENCIL_ERR_USAGE, "--dims: %lld ranks along one axis is too many", (long long)v[n]);
    n++;
    tok = strtok_r(NULL, "x", &save);
  }
  if (n < 2 || tok)
    FAIL0(STENCIL_ERR_USAGE, "--dims expects PxQxR (or PxQ in 2D), got \"%s\"", s);
  for (int a = 0; a < 3; a++)
    dims[a] = (int)v[a];
  if (n == 2)
    dims[2] = 1;
  return STENCIL_OK;
}

/* One of a list of words; *out gets its index. */
static int parse_choice(const char *opt, const char *s, const char *const *names, int *out)
{
  char list[160] = "";
  for (int i = 0; names[i]; i++) {
    if (strcmp(s, names[i]) == 0) {
      *out = i;
      return STENCIL_OK;
    }
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
  }
  FAIL0(STENCIL_ERR_USAGE, "%s expects one of %s, got \"%s\"", opt, list, s);
}

/* In the order of the values they stand for (tier 0 = auto, enum halo_transport). */
static const char *const kernel_names[] = {"auto", "1", "2", "3", NULL};
static const char *const off_on[] = {"off", "on", NULL};
static const char *const overlap_names[] = {"off", "on", "parts", "signal", NULL};
static const char *const transport_names[] = {"auto", "mpi-host", "mpi-device",
                                              "ipc",  "nccl",     NULL};

/* --steps-per-launch, --cluster-size and --chunk tune tier 3 of the cuda backend: given with a
 * backend or tier that cannot use them, the command line contradicts itself. */
static int check_fused_options(const struct options *o)
{
  const char *opt = o->steps_per_launch > 0  ? "--steps-per-launch"
                    : o->cluster_size[0] > 0 ? "--cluster-size"
                    : o->chunk > 0           ? "--chunk"
                                             : NULL;
  if (!opt)
    return STENCIL_OK;
  if (o->backend == BACKEND_CPU)
    FAIL0(STENCIL_ERR_USAGE,
          "%s applies to tier 3 of the cuda backend, but --backend cpu was given; leave it out "
          "or use --backend cuda",
          opt);
  if (o->kernel_tier == 1 || o->kernel_tier == 2)
    FAIL0(STENCIL_ERR_USAGE,
          "%s applies to tier 3 (the fused kernel), but --kernel %d was given; use --kernel 3 "
          "(or auto) or leave %s out",
          opt, o->kernel_tier, opt);
  return STENCIL_OK;
}

void options_backend(const struct options *o, struct backend_options *b)
{
  const int device = b->device;
  *b = (struct backend_options){.device = device,
                                .tier = o->kernel_tier,
                                .steps = o->steps_per_launch,
                                .cluster = {o->cluster_size[0], o->cluster_size[1]},
                                .chunk = o->chunk,
                                .overlap = o->overlap,
                                .pdl = o->pdl};
  const int tuned = o->steps_per_launch > 0 || o->cluster_size[0] > 0 || o->chunk > 0;
  if (o->kernel_tier == 0 && tuned) /* the fused-kernel options imply --kernel 3 */
    b->tier = 3;
}

int options_parse(int argc, char **argv, struct options *o)
{
  memset(o, 0, sizeof *o);
  o->steps = -1;
  o->tolerance = -1;
  o->residual_every = -1;
  o->check_every = 100;
  o->progress_every = 10.0;
  o->keep_checkpoints = 3;
  o->output_stride = 1;
  o->agree_every = 10;
  o->overlap = 1;
  o->pdl = 1;
  enum {
    OPT_STEPS = 256,
    OPT_DIMS,
    OPT_BACKEND,
    OPT_OUTDIR,
    OPT_OVERWRITE,
    OPT_QUIET,
    OPT_JSON,
    OPT_DRY,
    OPT_UNSTABLE,
    OPT_CHECK,
    OPT_PROGRESS,
    OPT_PEAK,
    OPT_KERNEL,
    OPT_OVERLAP,
    OPT_TRANSPORT,
    OPT_GPU_SHARING,
    OPT_PDL,
    OPT_HELP,
    OPT_VERSION,
    OPT_CKPT_EVERY,
    OPT_CKPT_INTERVAL,
    OPT_KEEP,
    OPT_RESTART,
    OPT_OUT_EVERY,
    OPT_OUT_STRIDE,
    OPT_WALLTIME,
    OPT_AGREE,
    OPT_CKPT_DELAY,
    OPT_CKPT_MODE,
    OPT_TOLERANCE,
    OPT_RESIDUAL_EVERY,
    OPT_STEPS_PER_LAUNCH,
    OPT_CLUSTER_SIZE,
    OPT_CHUNK
  };
  static const struct option longopts[] = {
      {"steps", required_argument, NULL, OPT_STEPS},
      {"dims", required_argument, NULL, OPT_DIMS},
      {"backend", required_argument, NULL, OPT_BACKEND},
      {"output-dir", required_argument, NULL, OPT_OUTDIR},
      {"overwrite", no_argument, NULL, OPT_OVERWRITE},
      {"quiet", no_argument, NULL, OPT_QUIET},
      {"report-json", required_argument, NULL, OPT_JSON},
      {"dry-run", no_argument, NULL, OPT_DRY},
      {"allow-unstable", no_argument, NULL, OPT_UNSTABLE},
      {"check-every", required_argument, NULL, OPT_CHECK},
      {"progress", required_argument, NULL, OPT_PROGRESS},
      {"peak-bandwidth", required_argument, NULL, OPT_PEAK},
      {"kernel", required_argument, NULL, OPT_KERNEL},
      {"overlap", required_argument, NULL, OPT_OVERLAP},
      {"halo-transport", required_argument, NULL, OPT_TRANSPORT},
      {"allow-gpu-sharing", no_argument, NULL, OPT_GPU_SHARING},
      {"pdl", required_argument, NULL, OPT_PDL},
      {"help", no_argument, NULL, OPT_HELP},
      {"version", no_argument, NULL, OPT_VERSION},
      {"checkpoint-every", required_argument, NULL, OPT_CKPT_EVERY},
      {"checkpoint-interval", required_argument, NULL, OPT_CKPT_INTERVAL},
      {"keep-checkpoints", required_argument, NULL, OPT_KEEP},
      {"restart", required_argument, NULL, OPT_RESTART},
      {"output-every", required_argument, NULL, OPT_OUT_EVERY},
      {"output-stride", required_argument, NULL, OPT_OUT_STRIDE},
      {"walltime", required_argument, NULL, OPT_WALLTIME},
      {"agree-every", required_argument, NULL, OPT_AGREE},
      {"debug-checkpoint-delay", required_argument, NULL, OPT_CKPT_DELAY},
      {"checkpoint-mode", required_argument, NULL, OPT_CKPT_MODE},
      {"tolerance", required_argument, NULL, OPT_TOLERANCE},
      {"residual-every", required_argument, NULL, OPT_RESIDUAL_EVERY},
      {"steps-per-launch", required_argument, NULL, OPT_STEPS_PER_LAUNCH},
      {"cluster-size", required_argument, NULL, OPT_CLUSTER_SIZE},
      {"chunk", required_argument, NULL, OPT_CHUNK},
      {NULL, 0, NULL, 0},
  };
  opterr = 0;
  optind = 1;
  int c;
  while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
    switch (c) {
    case OPT_STEPS: CHECK(parse_int64("--steps", optarg, 0, &o->steps)); break;
    case OPT_DIMS: CHECK(parse_dims(optarg, o->dims)); break;
    case OPT_BACKEND:
      if (strcmp(optarg, "cpu") == 0)
        o->backend = BACKEND_CPU;
      else if (strcmp(optarg, "cuda") == 0)
        o->backend = BACKEND_CUDA;
      else if (strcmp(optarg, "auto") == 0)
        o->backend = BACKEND_AUTO;
      else
        FAIL0(STENCIL_ERR_USAGE, "--backend expects cpu, cuda or auto, got \"%s\"", optarg);
      break;
    case OPT_OUTDIR:
      if (!optarg[0])
        FAIL0(STENCIL_ERR_USAGE, "--output-dir must not be empty");
      o->output_dir = optarg;
      break;
    case OPT_OVERWRITE: o->overwrite = 1; break;
    case OPT_QUIET: o->quiet = 1; break;
    case OPT_JSON: o->report_json = optarg; break;
    case OPT_DRY: o->dry_run = 1; break;
    case OPT_UNSTABLE: o->allow_unstable = 1; break;
    case OPT_CHECK:
      CHECK(parse_int64("--check-every", optarg, 0, &o->check_every));
      o->check_every_given = 1;
      break;
    case OPT_PROGRESS: {
      char *end = NULL;
      o->progress_every = strtod(optarg, &end);
      if (!end || *end || end == optarg || !(o->progress_every >= 0))
        FAIL0(STENCIL_ERR_USAGE, "--progress expects a number of seconds >= 0, got \"%s\"", optarg);
      break;
    }
    case OPT_PEAK: {
      char *end = NULL;
      if (strcmp(optarg, "measure") == 0) {
        o->measure_bandwidth = 1;
        break;
      }
      o->peak_bandwidth = strtod(optarg, &end) * 1e9;
      if (!end || *end || end == optarg || !(o->peak_bandwidth > 0))
        FAIL0(STENCIL_ERR_USAGE, "--peak-bandwidth expects GB/s > 0 or \"measure\", got \"%s\"",
              optarg);
      break;
    }
    case OPT_KERNEL: CHECK(parse_choice("--kernel", optarg, kernel_names, &o->kernel_tier)); break;
    case OPT_OVERLAP: CHECK(parse_choice("--overlap", optarg, overlap_names, &o->overlap)); break;
    case OPT_TRANSPORT:
      CHECK(parse_choice("--halo-transport", optarg, transport_names, &o->halo_transport));
      break;
    case OPT_GPU_SHARING: o->allow_gpu_sharing = 1; break;
    case OPT_PDL: CHECK(parse_choice("--pdl", optarg, off_on, &o->pdl)); break;
    case 'h':
    case OPT_HELP: o->help = 1; break;
    case OPT_VERSION: o->version = 1; break;
    case OPT_CKPT_EVERY:
      CHECK(parse_int64("--checkpoint-every", optarg, 0, &o->checkpoint_every));
      break;
    case OPT_CKPT_INTERVAL:
      CHECK(parse_seconds("--checkpoint-interval", optarg, &o->checkpoint_interval));
      break;
    case OPT_KEEP: CHECK(parse_int64("--keep-checkpoints", optarg, 0, &o->keep_checkpoints)); break;
    case OPT_RESTART:
      if (!optarg[0])
        FAIL0(STENCIL_ERR_USAGE, "--restart expects a checkpoint file or \"latest\"");
      o->restart = optarg;
      break;
    case OPT_OUT_EVERY: CHECK(parse_int64("--output-every", optarg, 0, &o->output_every)); break;
    case OPT_OUT_STRIDE:
      CHECK(parse_int64("--output-stride", optarg, 1, &o->output_stride));
      if (o->output_stride > 1 << 20)
        FAIL0(STENCIL_ERR_USAGE, "--output-stride %s is too large", optarg);
      break;
    case OPT_WALLTIME: CHECK(parse_walltime(optarg, &o->walltime)); break;
    case OPT_AGREE:
      CHECK(parse_int64("--agree-every", optarg, 1, &o->agree_every));
      o->agree_every_given = 1;
      break;
    case OPT_CKPT_MODE:
      if (strcmp(optarg, "sync") == 0)
        o->checkpoint_background = 0;
      else if (strcmp(optarg, "background") == 0)
        o->checkpoint_background = 1;
      else
        FAIL0(STENCIL_ERR_USAGE, "--checkpoint-mode expects sync or background, got \"%s\"",
              optarg);
      break;
    case OPT_CKPT_DELAY:
      CHECK(parse_seconds("--debug-checkpoint-delay", optarg, &o->debug_checkpoint_delay));
      break;
    case OPT_TOLERANCE: {
      char *end = NULL;
      errno = 0;
      o->tolerance = strtod(optarg, &end);
      if (errno || !end || *end || end == optarg || !(o->tolerance >= 0) || o->tolerance > 1e300)
        FAIL0(STENCIL_ERR_USAGE, "--tolerance expects a number >= 0, got \"%s\"", optarg);
      break;
    }
    case OPT_RESIDUAL_EVERY:
      CHECK(parse_int64("--residual-every", optarg, 0, &o->residual_every));
      break;
    case OPT_STEPS_PER_LAUNCH: {
      int64_t t = 0;
      CHECK(parse_int64("--steps-per-launch", optarg, 0, &t));
      if (t > BACKEND_MAX_STEPS)
        FAIL0(STENCIL_ERR_USAGE,
              "--steps-per-launch expects 0 (chosen from the device) or 1 to %d fused steps, got "
              "\"%s\"",
              BACKEND_MAX_STEPS, optarg);
      o->steps_per_launch = (int)t;
      break;
    }
    case OPT_CLUSTER_SIZE: CHECK(parse_cluster(optarg, o->cluster_size)); break;
    case OPT_CHUNK: {
      int64_t c = 0;
      CHECK(parse_int64("--chunk", optarg, 0, &c));
      if (c > 65536)
        FAIL0(STENCIL_ERR_USAGE,
              "--chunk expects 0 (chosen from the device) or 1 to 65536, got \"%s\"", optarg);
      o->chunk = (int)c;
      break;
    }
    case ':': FAIL0(STENCIL_ERR_USAGE, "option %s needs a value (see --help)", argv[optind - 1]);
    default: FAIL0(STENCIL_ERR_USAGE, "unknown option %s (see --help)", argv[optind - 1]);
    }
  }
  if (o->help || o->version)
    return STENCIL_OK;
  CHECK(check_fused_options(o));
  if (optind != argc - 1)
    FAIL0(STENCIL_ERR_USAGE,
          optind >= argc ? "no input file given (usage: stencil [options] "
                           "INPUT.h5; see --help)"
                         : "expected one input file, got %d arguments",
          argc - optind);
  o->input = argv[optind];
  return STENCIL_OK;
}
