// placeholder, replaced by the real store
#include "dl_cache.h"
typedef int placeholder_unused;
