/* The command line of `stencil`: one table of options (opts, below) from which the parser,
 * --help, --help-all and docs/user/options.md come. */
#include "app/options.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error_mpi.h"
#include "kernels/backend.h"

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

/* --cluster-size: N or CXxCY (N: 1xN, CTAs along y); 0 = default. At most 16 CTAs in all (the
 * plan takes CX = 1 only). */
static int parse_cluster(const char *s, int c[2])
{
  int64_t v[2] = {1, 0};
  const char *x = strchr(s, 'x');
  char buf[64];
  if (strlen(s) >= sizeof buf)
    FAIL0(STENCIL_ERR_USAGE, "--cluster-size: \"%s\" is too long", s);
  strcpy(buf, s);
  if (x) {
    buf[x - s] = 0;
    if (!buf[0] || !x[1] || strchr(x + 1, 'x'))
      FAIL0(STENCIL_ERR_USAGE, "--cluster-size expects N or 1xN (CTAs per cluster), got \"%s\"", s);
    CHECK(parse_int64("--cluster-size", buf, 1, &v[0]));
    CHECK(parse_int64("--cluster-size", x + 1, 1, &v[1]));
  } else {
    CHECK(parse_int64("--cluster-size", buf, 0, &v[1]));
    if (v[1] == 0)
      v[0] = 0;
  }
  if (v[0] > 16 || v[1] > 16 || v[0] * v[1] > 16)
    FAIL0(STENCIL_ERR_USAGE,
          "--cluster-size %s: a thread-block cluster has at most 16 CTAs (8 portable)", s);
  c[0] = (int)v[0];
  c[1] = (int)v[1];
  return STENCIL_OK;
}

static int parse_dims(const char *s, int dims[3], int *axes)
{
  int64_t v[3] = {0, 0, 0};
  char buf[128];
  if (strlen(s) >= sizeof buf)
    FAIL0(STENCIL_ERR_USAGE, "--dims: \"%s\" is too long", s);
  strcpy(buf, s);
  const size_t len = strlen(s);
  const int empty_part = len == 0 || s[0] == 'x' || s[len - 1] == 'x' || strstr(s, "xx");
  char *save = NULL, *tok = strtok_r(buf, "x", &save);
  int n = 0, bad = empty_part;
  while (tok && n < 3 && !bad) {
    char *end = NULL;
    errno = 0;
    v[n] = strtoll(tok, &end, 10);
    bad = errno || end == tok || *end || v[n] < 0;
    if (!bad && v[n] > 1 << 20)
      FAIL0(STENCIL_ERR_USAGE, "--dims: %lld ranks along one axis is too many", (long long)v[n]);
    n++;
    tok = strtok_r(NULL, "x", &save);
  }
  if (bad || n < 2 || tok)
    FAIL0(STENCIL_ERR_USAGE, "--dims expects PxQxR (or PxQ in 2D), got \"%s\"", s);
  for (int a = 0; a < 3; a++)
    dims[a] = (int)v[a];
  if (n == 2)
    dims[2] = 1;
  *axes = n;
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

/* In the order of the values they stand for (--kernel 0 = auto, enum halo_transport). */
static const char *const kernel_names[] = {"auto", "1", "2", "3", NULL};
static const char *const off_on[] = {"off", "on", NULL};
static const char *const overlap_names[] = {"off", "on", "parts", "signal", "auto", NULL};
static const char *const transport_names[] = {"auto", "mpi-host", "mpi-device",
                                              "ipc",  "nccl",     NULL};

/* ---- the options ----------------------------------------------------------------------------

 * One entry per option: its name and argument, its topic, whether only --help-all lists it
 * (tuning and diagnostics), how its value is read, and its help text. The parser, --help,
 * --help-all and the options table of docs/user/options.md (--help-markdown) all come from
 * this table. */

enum topic { T_RUN, T_POISSON, T_OUTPUT, T_GPU, T_TUNING, T_DIAG, T_INFO, T_COUNT };
static const char *const topic_title[T_COUNT] = {
    "Run",         "Poisson",    "Output, checkpoints and restart", "GPUs", "GPU kernel tuning",
    "Diagnostics", "Information"};

enum kind { K_FLAG, K_INT64, K_SECONDS, K_CHOICE, K_FUNC };

struct opt_def {
  const char *name; /* without the leading -- */
  const char *arg;  /* the argument's placeholder; NULL: a flag */
  enum topic topic;
  int all; /* listed by --help-all only */
  enum kind kind;
  size_t off;  /* the field of struct options (K_FLAG, K_INT64, K_SECONDS, K_CHOICE) */
  int64_t min; /* K_INT64: the smallest value */
  const char *const *choices;                      /* K_CHOICE: the words, field an int */
  int (*func)(struct options *o, const char *arg); /* K_FUNC */
  const char *help;
};

#define FIELD(f) offsetof(struct options, f)

static int opt_backend(struct options *o, const char *a)
{
  if (strcmp(a, "cpu") == 0)
    o->backend = BACKEND_CPU;
  else if (strcmp(a, "cuda") == 0)
    o->backend = BACKEND_CUDA;
  else if (strcmp(a, "auto") == 0)
    o->backend = BACKEND_AUTO;
  else
    FAIL0(STENCIL_ERR_USAGE, "--backend expects cpu, cuda or auto, got \"%s\"", a);
  return STENCIL_OK;
}

/* KEY=VALUE, KEY a path of the input's schema: [/]GROUP/NAME (docs/user/input-format.md). The
 * key itself is checked when the input is read, like the file's own keys. */
static int opt_set(struct options *o, const char *a)
{
  const char *eq = strchr(a, '=');
  const char *key = a[0] == '/' ? a + 1 : a;
  const size_t len = eq ? (size_t)(eq - key) : 0;
  int ok = eq && eq > key && len < 200 && key[0] != '/' && key[len - 1] != '/';
  for (size_t i = 0; ok && i + 1 < len; i++)
    ok = !(key[i] == '/' && key[i + 1] == '/');
  if (!ok)
    FAIL0(STENCIL_ERR_USAGE,
          "--set expects KEY=VALUE with KEY an input key such as time/dt or grid/shape "
          "(docs/user/input-format.md), got \"%s\"",
          a);
  if (o->nsets == OPTIONS_MAX_SETS)
    FAIL0(STENCIL_ERR_USAGE, "at most %d --set options", OPTIONS_MAX_SETS);
  o->sets[o->nsets++] = a;
  return STENCIL_OK;
}

static int opt_dims(struct options *o, const char *a)
{
  return parse_dims(a, o->dims, &o->dims_axes);
}

static int opt_output_dir(struct options *o, const char *a)
{
  if (!a[0])
    FAIL0(STENCIL_ERR_USAGE, "--output-dir must not be empty");
  o->output_dir = a;
  return STENCIL_OK;
}

static int opt_report_json(struct options *o, const char *a)
{
  o->report_json = a;
  return STENCIL_OK;
}

static int opt_check_every(struct options *o, const char *a)
{
  o->check_every_given = 1;
  return parse_int64("--check-every", a, 0, &o->check_every);
}

static int opt_agree_every(struct options *o, const char *a)
{
  o->agree_every_given = 1;
  return parse_int64("--agree-every", a, 1, &o->agree_every);
}

static int opt_progress(struct options *o, const char *a)
{
  char *end = NULL;
  o->progress_every = strtod(a, &end);
  if (!end || *end || end == a || !(o->progress_every >= 0))
    FAIL0(STENCIL_ERR_USAGE, "--progress expects a number of seconds >= 0, got \"%s\"", a);
  return STENCIL_OK;
}

static int opt_peak(struct options *o, const char *a)
{
  char *end = NULL;
  if (strcmp(a, "measure") == 0) {
    o->measure_bandwidth = 1;
    return STENCIL_OK;
  }
  o->peak_bandwidth = strtod(a, &end) * 1e9;
  if (!end || *end || end == a || !(o->peak_bandwidth > 0))
    FAIL0(STENCIL_ERR_USAGE, "--peak-bandwidth expects GB/s > 0 or \"measure\", got \"%s\"", a);
  return STENCIL_OK;
}

static int opt_tolerance(struct options *o, const char *a)
{
  char *end = NULL;
  errno = 0;
  o->tolerance = strtod(a, &end);
  if (errno || !end || *end || end == a || !(o->tolerance >= 0) || o->tolerance > 1e300)
    FAIL0(STENCIL_ERR_USAGE, "--tolerance expects a number >= 0, got \"%s\"", a);
  return STENCIL_OK;
}

static int opt_checkpoint_mode(struct options *o, const char *a)
{
  if (strcmp(a, "sync") == 0)
    o->checkpoint_background = 0;
  else if (strcmp(a, "background") == 0)
    o->checkpoint_background = 1;
  else
    FAIL0(STENCIL_ERR_USAGE, "--checkpoint-mode expects sync or background, got \"%s\"", a);
  return STENCIL_OK;
}

static int opt_restart(struct options *o, const char *a)
{
  if (!a[0])
    FAIL0(STENCIL_ERR_USAGE, "--restart expects a checkpoint file or \"latest\"");
  o->restart = a;
  return STENCIL_OK;
}

static int opt_output_stride(struct options *o, const char *a)
{
  CHECK(parse_int64("--output-stride", a, 1, &o->output_stride));
  if (o->output_stride > 1 << 20)
    FAIL0(STENCIL_ERR_USAGE, "--output-stride %s is too large", a);
  return STENCIL_OK;
}

static int opt_walltime(struct options *o, const char *a)
{
  return parse_walltime(a, &o->walltime);
}

static int opt_steps_per_launch(struct options *o, const char *a)
{
  int64_t t = 0;
  CHECK(parse_int64("--steps-per-launch", a, 0, &t));
  if (t > BACKEND_MAX_STEPS)
    FAIL0(STENCIL_ERR_USAGE,
          "--steps-per-launch expects 0 (chosen from the device) or 1 to %d fused steps, got "
          "\"%s\"",
          BACKEND_MAX_STEPS, a);
  o->steps_per_launch = (int)t;
  return STENCIL_OK;
}

static int opt_cluster_size(struct options *o, const char *a)
{
  return parse_cluster(a, o->cluster_size);
}

static int opt_chunk(struct options *o, const char *a)
{
  int64_t c = 0;
  CHECK(parse_int64("--chunk", a, 0, &c));
  if (c > 65536)
    FAIL0(STENCIL_ERR_USAGE, "--chunk expects 0 (chosen from the device) or 1 to 65536, got \"%s\"",
          a);
  o->chunk = (int)c;
  return STENCIL_OK;
}

/* clang-format off */
static const struct opt_def opts[] = {
  {"steps", "N", T_RUN, 0, K_INT64, FIELD(steps), 0, NULL, NULL,
   "Total number of time steps (default: /time/steps of the input); Poisson: the most Jacobi "
   "iterations (/solver/max_iterations)."},
  {"set", "KEY=VALUE", T_RUN, 0, K_FUNC, 0, 0, NULL, opt_set,
   "Override a key of the input, as if the file held VALUE (repeatable, applied in order): KEY "
   "as in docs/user/input-format.md, e.g. time/dt=1e-5, grid/shape=512,512,256 (arrays "
   "comma-separated), grid/x_lo=dirichlet, grid/x_lo_value=1. Checked like the file's keys; "
   "listed in the header and recorded in the outputs' /parameters."},
  {"dims", "PxQxR", T_RUN, 0, K_FUNC, 0, 0, NULL, opt_dims,
   "Ranks along x, y and z (x fastest; PxQ in 2D); 0 lets MPI choose an axis (default: "
   "MPI_Dims_create over all axes)."},
  {"backend", "B", T_RUN, 0, K_FUNC, 0, 0, NULL, opt_backend,
   "cpu, cuda or auto (default auto: cuda when this build has it and every rank sees a GPU of "
   "its own, else cpu); cuda takes GPU (node-local rank) mod (GPUs visible on the node)."},
  {"allow-unstable", NULL, T_RUN, 0, K_FLAG, FIELD(allow_unstable), 0, NULL, NULL,
   "Run even if dt exceeds the explicit stability limit (or the Jacobi damping does not "
   "converge)."},
  {"dry-run", NULL, T_RUN, 0, K_FLAG, FIELD(dry_run), 0, NULL, NULL,
   "Validate the input, decompose, print per-rank sizes and memory, and exit."},
  {"check-every", "N", T_RUN, 0, K_FUNC, 0, 0, NULL, opt_check_every,
   "Look for NaN/Inf every N steps (default 100, rounded up to a multiple of the steps per "
   "launch of the fused kernels; 0: only at the end). A check's result is read at the next "
   "one, so the device never waits: a bad step is reported N steps later, with its number."},
  {"progress", "SECONDS", T_RUN, 0, K_FUNC, 0, 0, NULL, opt_progress,
   "Print a progress line at most this often (default 10; 0: never)."},
  {"quiet", NULL, T_RUN, 0, K_FLAG, FIELD(quiet), 0, NULL, NULL,
   "Print only errors and warnings."},
  {"tolerance", "X", T_POISSON, 0, K_FUNC, 0, 0, NULL, opt_tolerance,
   "Stop when the residual norm ||f - L u|| <= X ||b|| (b: f with the boundary data; 0: run "
   "every iteration; default: /solver/tolerance of the input)."},
  {"residual-every", "N", T_POISSON, 0, K_INT64, FIELD(residual_every), 0, NULL, NULL,
   "The residual norm every N iterations (0: only the final one; default: "
   "/solver/residual_every of the input)."},
  {"output-dir", "DIR", T_OUTPUT, 0, K_FUNC, 0, 0, NULL, opt_output_dir,
   "Where output files go (default: /output/directory of the input)."},
  {"overwrite", NULL, T_OUTPUT, 0, K_FLAG, FIELD(overwrite), 0, NULL, NULL,
   "Replace existing output files (otherwise the run refuses to start)."},
  {"report-json", "FILE", T_OUTPUT, 0, K_FUNC, 0, 0, NULL, opt_report_json,
   "Also write the final report as JSON to FILE."},
  {"checkpoint-every", "N", T_OUTPUT, 0, K_INT64, FIELD(checkpoint_every), 0, NULL, NULL,
   "Write a checkpoint every N steps (default 0: none)."},
  {"checkpoint-interval", "SECONDS", T_OUTPUT, 0, K_SECONDS, FIELD(checkpoint_interval), 0, NULL,
   NULL, "Also write one when this much wall time has passed since the last (default 0: never)."},
  {"keep-checkpoints", "K", T_OUTPUT, 0, K_INT64, FIELD(keep_checkpoints), 0, NULL, NULL,
   "Keep the newest K checkpoints (default 3; 0 keeps all)."},
  {"checkpoint-mode", "M", T_OUTPUT, 0, K_FUNC, 0, 0, NULL, opt_checkpoint_mode,
   "sync (default): the loop waits for each checkpoint write; background: the loop only copies "
   "the field to a host buffer and a thread writes it while the next steps run."},
  {"restart", "FILE|latest", T_OUTPUT, 0, K_FUNC, 0, 0, NULL, opt_restart,
   "Continue from a checkpoint (latest: the newest in the output directory) up to --steps total "
   "steps; later snapshots and checkpoints there are moved aside into superseded-*/."},
  {"output-every", "N", T_OUTPUT, 0, K_INT64, FIELD(output_every), 0, NULL, NULL,
   "Write a snapshot every N steps, listed in snapshots.xdmf (default 0: none)."},
  {"output-stride", "S", T_OUTPUT, 0, K_FUNC, 0, 0, NULL, opt_output_stride,
   "Snapshots keep every S-th cell along each axis (default 1)."},
  {"history-every", "N", T_OUTPUT, 0, K_INT64, FIELD(history_every), 0, NULL, NULL,
   "Append a row of step, time and the field's L2 norm, max |u| and integral to history.csv in "
   "the output directory every N steps, and at the start and the end (default 0: no file)."},
  {"walltime", "HH:MM:SS", T_OUTPUT, 0, K_FUNC, 0, 0, NULL, opt_walltime,
   "Checkpoint and stop (exit status 4) before this much wall time has passed since the start "
   "(also accepts seconds)."},
  {"io-timeout", "SECONDS", T_OUTPUT, 0, K_SECONDS, FIELD(io_timeout), 0, NULL, NULL,
   "End the run (exit status 1) when one write of a field file takes longer than this: a write "
   "that failed on another rank can leave the ranks waiting for each other (default 600; 0: "
   "no limit)."},
  {"halo-transport", "T", T_GPU, 0, K_CHOICE, FIELD(halo_transport), 0, transport_names, NULL,
   "How halos travel between GPUs: mpi-host (page-locked host buffers), mpi-device (CUDA-aware "
   "MPI only), ipc (CUDA IPC peer copies, ranks of one node that see each other's GPUs), nccl, "
   "or auto (default: ipc when every neighbour shares the node and its GPU is visible, else "
   "nccl, mpi-device, mpi-host)."},
  {"allow-gpu-sharing", NULL, T_GPU, 0, K_FLAG, FIELD(allow_gpu_sharing), 0, NULL, NULL,
   "Let several ranks of a node share one GPU."},
  {"peak-bandwidth", "X", T_GPU, 0, K_FUNC, 0, 0, NULL, opt_peak,
   "Memory bandwidth for the report's \"% of peak\": GB/s, or \"measure\" to time a "
   "STREAM-like triad (cpu) or a device copy (cuda) on every rank at start-up (default: not "
   "reported)."},
  {"kernel", "auto|1|2|3", T_TUNING, 1, K_CHOICE, FIELD(kernel_tier), 0, kernel_names, NULL,
   "The cuda kernels: 1 the plain global-memory reference, 2 the tuned streaming single step "
   "(radius 1, and radius 2 to 4 in 3D; tier 1 elsewhere), 3 the fused kernels (T steps per "
   "launch, halos T x radius cells deep exchanged once per launch; every problem of radius 1 "
   "to 4, 2D and 3D). auto (default): the fused kernels, except tier 2 where it is faster: in "
   "3D a source term beside a Dirichlet face of nonzero value where n along x is not whole "
   "16-byte vectors, and at radius 2 to 4 a Dirichlet face of nonzero value (at radius 2: "
   "with a source term, or where n along x is not whole vectors), a source term where n along "
   "x is not whole vectors or at radius 3 and 4, the 25-point and the 19-point stars; the "
   "header says which runs and why."},
  {"steps-per-launch", "T", T_TUNING, 1, K_FUNC, 0, 0, NULL, opt_steps_per_launch,
   "Fused kernels: time steps per launch, 1 to 8 (default 0: from the device). Poisson with "
   "--residual-every <= T: lowered to the longest launch that sums residuals (2D: 4 in fp32, 5 "
   "in fp64; 3D radius 1 with homogeneous faces: 3)."},
  {"cluster-size", "N|1xN", T_TUNING, 1, K_FUNC, 0, 0, NULL, opt_cluster_size,
   "3D fused kernel: CTAs per thread-block cluster, at most 16 (default: one CTA per tile, the "
   "fastest measured). They stack their tiles along y and hand each other their edge rows "
   "through distributed shared memory (asynchronous stores completing on mbarriers); radius "
   "1, halo faces, no source term."},
  {"chunk", "N", T_TUNING, 1, K_FUNC, 0, 0, NULL, opt_chunk,
   "Fused kernels: planes (3D) or rows (2D) each CTA streams through (default 0: from a model "
   "of the device's waves of CTAs; 3D may then cut only some tiles into chunks, \"by tile\" "
   "in the device line). --steps-per-launch, --cluster-size and --chunk imply --kernel 3 under "
   "auto, are refused with --backend cpu or --kernel 1|2, and are ignored (with a note) where "
   "auto picks cpu."},
  {"overlap", "auto|on|off|parts|signal", T_TUNING, 1, K_CHOICE, FIELD(overlap), 0,
   overlap_names, NULL,
   "Update the cells other ranks need first and exchange them while the rest is updated on "
   "another stream. auto (the default): on, but off where ranks share a GPU (its time slices "
   "between the ranks' processes leave nothing to overlap, and the split launches cost). Fused "
   "3D launches run the sent planes and the tiles of the "
   "sent x and y faces first; on blocks that send along z only in the form a model of the "
   "launch picks: parts forces the sent planes first, then the rest; signal one launch that "
   "signals when the sent planes are stored, where the plan allows it. off serialises."},
  {"pdl", "on|off", T_TUNING, 1, K_CHOICE, FIELD(pdl), 0, off_on, NULL,
   "Programmatic dependent launch between successive kernels (default on)."},
  {"agree-every", "N", T_DIAG, 1, K_FUNC, 0, 0, NULL, opt_agree_every,
   "Steps between the ranks' non-blocking agreement on signals, --checkpoint-interval and "
   "--walltime, made at the end of the first advance at or after each multiple of N (default "
   "10, rounded up to a multiple of the steps per launch of the fused kernels)."},
  {"debug-checkpoint-delay", "SECONDS", T_DIAG, 1, K_SECONDS, FIELD(debug_checkpoint_delay), 0,
   NULL, NULL, "Tests only: pause this long inside every checkpoint write."},
  {"help", NULL, T_INFO, 0, K_FLAG, FIELD(help), 0, NULL, NULL,
   "Print the options users set, and exit (--help-all: every option)."},
  {"help-all", NULL, T_INFO, 1, K_FLAG, FIELD(help_all), 0, NULL, NULL,
   "Print every option, tuning and diagnostics included, and exit."},
  {"help-markdown", NULL, T_INFO, 1, K_FLAG, FIELD(help_markdown), 0, NULL, NULL,
   "Print every option as the Markdown tables of docs/user/options.md, and exit."},
  {"version", NULL, T_INFO, 0, K_FLAG, FIELD(version), 0, NULL, NULL,
   "Print the version and build configuration, and exit."},
};
/* clang-format on */
enum { NOPTS = (int)(sizeof opts / sizeof opts[0]) };

/* ---- help ----------------------------------------------------------------------------------- */

static const char *const help_intro =
    "Usage: stencil [options] INPUT.h5\n"
    "       mpirun -n P stencil [options] INPUT.h5\n"
    "\n"
    "Solves the explicit heat equation or the Poisson equation (Jacobi iteration) described by\n"
    "INPUT.h5 (docs/user/input-format.md) on a grid decomposed over the MPI ranks, and writes the\n"
    "final field to the output directory.\n";
static const char *const help_outro =
    "Exit status: 0 success, 1 error, 2 bad command line, 3 non-finite values in the field, 4\n"
    "stopped early by SIGUSR1, SIGTERM, SIGINT or --walltime after writing a checkpoint\n"
    "(continue with --restart latest). Set STENCIL_TRACEBACK=1 to print where an error\n"
    "travelled through the code.\n";

/* "--name ARG" of an option. */
static void opt_label(const struct opt_def *d, char *buf, size_t len)
{
  snprintf(buf, len, "--%s%s%s", d->name, d->arg ? " " : "", d->arg ? d->arg : "");
}

/* text wrapped to lines of at most 79 columns, each after `indent` spaces; `col` columns of
 * the first line are printed already (a new line starts where they reach the indent). */
static void print_wrapped(const char *text, int indent, int col)
{
  if (col + 2 > indent)
    printf("\n%*s", indent, "");
  else
    printf("%*s", indent - col, "");
  int used = 0;
  for (const char *p = text; *p;) {
    while (*p == ' ')
      p++;
    const char *e = p;
    while (*e && *e != ' ')
      e++;
    const int n = (int)(e - p);
    if (n == 0)
      break;
    if (used > 0 && indent + used + 1 + n > 79) {
      printf("\n%*s", indent, "");
      used = 0;
    }
    printf("%s%.*s", used > 0 ? " " : "", n, p);
    used += (used > 0) + n;
    p = e;
  }
  printf("\n");
}

void options_print_help(int all)
{
  printf("%s", help_intro);
  for (int t = 0; t < T_COUNT; t++) {
    int any = 0;
    for (int i = 0; i < NOPTS; i++)
      any |= opts[i].topic == (enum topic)t && (all || !opts[i].all);
    if (!any)
      continue;
    printf("\n%s:\n", topic_title[t]);
    for (int i = 0; i < NOPTS; i++) {
      if (opts[i].topic != (enum topic)t || (!all && opts[i].all))
        continue;
      char label[64];
      opt_label(&opts[i], label, sizeof label);
      printf("  %s", label);
      print_wrapped(opts[i].help, 23, 2 + (int)strlen(label));
    }
  }
  if (!all)
    printf("\nTuning and diagnostic options: --help-all.\n");
  printf("\n%s", help_outro);
}

/* Text in a Markdown table cell: | escaped. */
static void md_cell(const char *text)
{
  for (const char *p = text; *p; p++)
    fputs(*p == '|' ? "\\|" : (char[2]){*p, 0}, stdout);
}

void options_print_markdown(void)
{
  printf("# Options of `stencil`\n\n"
         "Generated by `stencil --help-markdown` from the options' definition (app/options.c); "
         "the test docs_options checks that this file matches it. `stencil --help` lists the "
         "options users set, `--help-all` every option.\n");
  for (int t = 0; t < T_COUNT; t++) {
    printf("\n## %s\n\n| option | what it does |\n|---|---|\n", topic_title[t]);
    for (int i = 0; i < NOPTS; i++) {
      if (opts[i].topic != (enum topic)t)
        continue;
      char label[64];
      opt_label(&opts[i], label, sizeof label);
      printf("| `");
      md_cell(label);
      printf("` | ");
      md_cell(opts[i].help);
      printf("%s |\n", opts[i].all ? " (`--help-all`)" : "");
    }
  }
}

/* ---- parsing ----------------------------------------------------------------------------------
 */

static int apply(const struct opt_def *d, struct options *o, const char *arg)
{
  char name[40];
  snprintf(name, sizeof name, "--%s", d->name);
  char *field = (char *)o + d->off;
  switch (d->kind) {
  case K_FLAG: *(int *)(void *)field = 1; return STENCIL_OK;
  case K_INT64: return parse_int64(name, arg, d->min, (int64_t *)(void *)field);
  case K_SECONDS: return parse_seconds(name, arg, (double *)(void *)field);
  case K_CHOICE: return parse_choice(name, arg, d->choices, (int *)(void *)field);
  case K_FUNC: return d->func(o, arg);
  }
  return STENCIL_ERR;
}

/* The fused-kernel options tune the cuda backend's fused kernels: given with a backend or
 * kernel that cannot use them, the command line contradicts itself. */
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
          "%s applies to the fused kernels of the cuda backend, but --backend cpu was given; "
          "leave it out or use --backend cuda",
          opt);
  if (o->kernel_tier == 1 || o->kernel_tier == 2)
    FAIL0(STENCIL_ERR_USAGE,
          "%s applies to the fused kernels (--kernel 3), but --kernel %d was given; use --kernel "
          "3 (or auto) or leave %s out",
          opt, o->kernel_tier, opt);
  return STENCIL_OK;
}

void options_backend(const struct options *o, int shared_gpu, struct backend_options *b)
{
  const int device = b->device;
  *b = (struct backend_options){.device = device,
                                .tier = o->kernel_tier,
                                .steps = o->steps_per_launch,
                                .cluster = {o->cluster_size[0], o->cluster_size[1]},
                                .chunk = o->chunk,
                                .overlap = o->overlap == OVERLAP_AUTO ? !shared_gpu : o->overlap,
                                .pdl = o->pdl};
  const int tuned = o->steps_per_launch > 0 || o->cluster_size[0] > 0 || o->chunk > 0;
  if (o->kernel_tier == 0 && tuned) /* the fused-kernel options imply --kernel 3 */
    b->tier = 3;
}

static void defaults(struct options *o)
{
  memset(o, 0, sizeof *o);
  o->steps = -1;
  o->tolerance = -1;
  o->residual_every = -1;
  o->check_every = 100;
  o->progress_every = 10.0;
  o->io_timeout = 600.0;
  o->keep_checkpoints = 3;
  o->output_stride = 1;
  o->agree_every = 10;
  o->overlap = OVERLAP_AUTO;
  o->pdl = 1;
}

int options_parse(int argc, char **argv, struct options *o)
{
  defaults(o);
  struct option longopts[NOPTS + 1];
  for (int i = 0; i < NOPTS; i++)
    longopts[i] =
        (struct option){opts[i].name, opts[i].arg ? required_argument : no_argument, NULL, 256 + i};
  longopts[NOPTS] = (struct option){NULL, 0, NULL, 0};
  opterr = 0;
  optind = 1;
  int c;
  while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
    if (c >= 256 && c < 256 + NOPTS)
      CHECK(apply(&opts[c - 256], o, optarg));
    else if (c == 'h')
      o->help = 1;
    else if (c == ':')
      FAIL0(STENCIL_ERR_USAGE, "option %s needs a value (see --help)", argv[optind - 1]);
    else
      FAIL0(STENCIL_ERR_USAGE, "unknown option %s (see --help)", argv[optind - 1]);
  }
  if (o->help || o->help_all || o->help_markdown || o->version)
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
