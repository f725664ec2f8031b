// tools/plot.h — `dlcc plot`: a training log (dlcc train --log) drawn as a dependency-free SVG
// (tools/plot.c). Part of the dlcc main: it prints its own messages and returns an exit status.
#ifndef DL_TOOLS_PLOT_H
#define DL_TOOLS_PLOT_H

// `dlcc plot LOG [-o OUT.svg] [--title TEXT]` with argv the arguments after "plot".
int dlcc_plot_main(int argc, char **argv);

#endif
