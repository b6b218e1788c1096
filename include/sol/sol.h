#pragma once
// Everything public in Sol.
#include "sol/bench.h"
#include "sol/copy.h"
#include "sol/dtype.h"
#include "sol/error.h"
#include "sol/hw.h"
#include "sol/model.h"
#include "sol/registry.h"
#include "sol/roofline.h"
#include "sol/tensor.h"
#include "sol/threads.h"
#include "sol/timing.h"
