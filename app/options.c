#include "app/options.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

void options_print_help(void)
{
  printf(
      "Usage: stencil [options] INPUT.h5\n"
      "       mpirun -n P stencil [options] INPUT.h5\n"
      "\n"
      "Solves the explicit heat equation described by INPUT.h5 (docs/input-format.md) on a\n"
      "grid decomposed over the MPI ranks, and writes the final field to the output directory.\n"
      "\n"
      "Options:\n"
      "  --steps N            total number of time steps (default: /time/steps of the input)\n"
      "  --dims PxQxR         ranks along x, y and z (x fastest); 0 lets MPI choose an axis\n"
      "                       (default: MPI_Dims_create over all axes)\n"
      "  --backend B          cpu, cuda or auto (default auto: cuda when this build has it and\n"
      "                       a GPU is visible, else cpu)\n"
      "  --output-dir DIR     where output files go (default: /output/directory of the input)\n"
      "  --overwrite          replace existing output files (otherwise the run refuses to start)\n"
      "  --report-json FILE   also write the final report as JSON to FILE\n"
      "  --dry-run            validate, decompose, print per-rank sizes and memory, and exit\n"
      "  --allow-unstable     run even if dt exceeds the explicit stability limit\n"
      "  --check-every N      look for NaN/Inf every N steps (default 100; 0 = only at the end)\n"
      "  --progress SECONDS   print a progress line at most this often (default 10; 0 = never)\n"
      "  --peak-bandwidth X   memory bandwidth for the report's \"%% of peak\": GB/s, or\n"
      "                       \"measure\" to time a STREAM-like triad (cpu) or a device copy\n"
      "                       (cuda) on every rank at start-up (default: not reported)\n"
      "  --quiet              print only errors and warnings\n"
      "  --version            print the version and build configuration, and exit\n"
      "  --help               print this help and exit\n"
      "\n"
      "Exit status: 0 success, 1 error, 2 bad command line, 3 non-finite values in the field.\n"
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

int options_parse(int argc, char **argv, struct options *o)
{
  memset(o, 0, sizeof *o);
  o->steps = -1;
  o->check_every = 100;
  o->progress_every = 10.0;
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
    OPT_HELP,
    OPT_VERSION
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
      {"help", no_argument, NULL, OPT_HELP},
      {"version", no_argument, NULL, OPT_VERSION},
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
    case OPT_CHECK: CHECK(parse_int64("--check-every", optarg, 0, &o->check_every)); break;
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
    case 'h':
    case OPT_HELP: o->help = 1; break;
    case OPT_VERSION: o->version = 1; break;
    case ':': FAIL0(STENCIL_ERR_USAGE, "option %s needs a value (see --help)", argv[optind - 1]);
    default: FAIL0(STENCIL_ERR_USAGE, "unknown option %s (see --help)", argv[optind - 1]);
    }
  }
  if (o->help || o->version)
    return STENCIL_OK;
  if (optind != argc - 1)
    FAIL0(STENCIL_ERR_USAGE,
          optind >= argc ? "no input file given (usage: stencil [options] "
                           "INPUT.h5; see --help)"
                         : "expected one input file, got %d arguments",
          argc - optind);
  o->input = argv[optind];
  return STENCIL_OK;
}
