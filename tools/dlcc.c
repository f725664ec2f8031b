// tools/dlcc.c — placeholder main until the CLI lands.
#include "dl_fe.h"
int main(void) {
    return 0;
}
