// placeholder, replaced by the real tool
#include "dl_cache.h"
int main(void) {
    return 2;
}
