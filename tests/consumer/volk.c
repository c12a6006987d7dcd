// The app's own volk (Debian ships it as source), beside vkgrad's private copy.
#define VOLK_IMPLEMENTATION
#include <volk.h>
