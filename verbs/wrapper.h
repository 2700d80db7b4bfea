#include <infiniband/verbs.h>
