// placeholder, replaced by the real implementation
#include "dl_ir.h"
typedef int placeholder_unused;
