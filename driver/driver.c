// placeholder, replaced by the real driver
#include "dlcc.h"
typedef int placeholder_unused;
