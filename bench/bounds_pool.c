#include "bounds.h"
void bd_pool(int scale) { (void)scale; }
