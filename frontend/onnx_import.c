// frontend/onnx_import.c — ONNX (.onnx protobuf, default domain, opsets 1-21) to dl_ir_module.
//
// Two passes over the graph. The first (`plan`) decides everything that can fail on the input:
// opset and op support, constant values of initializers / Constant nodes / caller-bound graph
// inputs, which node operands become attributes (the graph format takes ONNX's shape-like tensor
// inputs -- Reshape `shape`, Slice `starts`..., Squeeze/Unsqueeze/ReduceX `axes`, Expand
// `shape`, Pad `pads`, Split `split` -- as INTS attributes) and which values are used as real
// operands. The second (`emit`) builds the module: inputs, params (or consts) for initializers
// that some node really reads, then nodes in ONNX order (already topological), then outputs.
//
// Names: every ONNX name is looked up in `syms` (open addressing on FNV-1a, grown at 50% load).
// A sym's .dlg identifier is made when its value is emitted: invalid characters become '_', a
// leading digit gets a 'v' prefix, and a clash with an existing name gets "_<n>" appended, so the
// mapping is deterministic for a given file. Diagnostics carry no location (an .onnx file has no
// lines) and name the node by index, name and op instead.
//
// The file is untrusted: before protobuf-c sees it, pb_check walks the wire format iteratively
// (nesting depth, framing); protobuf-c then allocates through dl_mem_* under a budget; counts
// are bounded by check_model and tensor sizes are checked against the data present before any
// tensor is allocated. Params stay independent tensors even when the exporter merged equal
// initializers (see "Aliased initializers").
#include "fe_onnx.h"
#include "onnx.pb-c.h"
#include "onnx_fold.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define OPSET_MIN 13
#define OPSET_MAX 21

// ---------------------------------------------------------------------------------------------
// ONNX dtype codes

bool dl_fe__dtype_from_onnx(int32_t code, dl_dtype *out) {
    switch (code) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT:
        *out = DL_DT_FLOAT;
        return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16:
        *out = DL_DT_FLOAT16;
        return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16:
        *out = DL_DT_BFLOAT16;
        return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32:
        *out = DL_DT_INT32;
        return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64:
        *out = DL_DT_INT64;
        return true;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL:
        *out = DL_DT_BOOL;
        return true;
    default:
        return false;
    }
}

static const char *onnx_dtype_name(int32_t code) {
    static const char *const names[] = {
        "undefined", "float",  "uint8",     "int8",       "uint16",   "int16",
        "int32",     "int64",  "string",    "bool",       "float16",  "double",
        "uint32",    "uint64", "complex64", "complex128", "bfloat16",
    };
    return code >= 0 && (size_t)code < DL_ARRAY_LEN(names) ? names[code] : "unknown";
}

// ---------------------------------------------------------------------------------------------
// Op versions. A model importing opset v gets, for each op, the newest definition with
// since_version <= v. The importer implements each op as opset 17 defines it, and accepts a
// node of opset v (1..21) when that node means the same thing under opset 17:
//  - v < 13: node by node, where the op's definition at v already meant what opset 17's means
//    for the types we support (the table below: the oldest such version, found by comparing
//    ONNX's schemas version by version and checking the changelog for changes of meaning the
//    schemas do not show). Axes, split and pads given as attributes (Squeeze/Unsqueeze,
//    ReduceSum, Split before 13) import like the inputs that replaced them. Softmax and
//    LogSoftmax before 13 coerce their input to 2-D at `axis`: accepted only for axis = -1, where
//    that is the same as softmax over the last axis.
//  - 13 <= v <= 21: accepted as a whole. Between 13 and 21 our ops only gained element types
//    or optional attributes and inputs (ReduceMean/Max/Min's axes as an input and Pad's `axes`
//    input at 18, Split's `num_outputs` at 18, AveragePool's `dilations` at 19, Cast's
//    `saturate` for float8 at 19): a node that uses one of those is refused by the attribute
//    and input checks (or, for axes inputs, imported like the attribute), naming it.

// The oldest opset whose definition of the op means what opset 17's does (0 = OPSET_MIN). A
// table rather than a switch because -Wswitch-enum wants every op named in a switch.
static const int64_t op_since_table[DL_IR_OP_COUNT] = {
    [DL_IR_OP_SOFTPLUS] = 1,
    [DL_IR_OP_NOT] = 1,
    [DL_IR_OP_GLOBAL_AVERAGE_POOL] = 1,
    [DL_IR_OP_TRANSPOSE] = 1,
    [DL_IR_OP_IDENTITY] = 1,
    [DL_IR_OP_MATMUL] = 1,
    [DL_IR_OP_NEG] = 6,
    [DL_IR_OP_ABS] = 6,
    [DL_IR_OP_EXP] = 6,
    [DL_IR_OP_LOG] = 6,
    [DL_IR_OP_SQRT] = 6,
    [DL_IR_OP_RECIPROCAL] = 6,
    [DL_IR_OP_RELU] = 6,
    [DL_IR_OP_LEAKY_RELU] = 6,
    [DL_IR_OP_SIGMOID] = 6,
    [DL_IR_OP_TANH] = 6,
    [DL_IR_OP_ADD] = 7, // broadcasting since 7
    [DL_IR_OP_SUB] = 7,
    [DL_IR_OP_MUL] = 7,
    [DL_IR_OP_DIV] = 7,
    [DL_IR_OP_POW] = 7,
    [DL_IR_OP_EQUAL] = 7,
    [DL_IR_OP_LESS] = 7,
    [DL_IR_OP_GREATER] = 7,
    [DL_IR_OP_AND] = 7,
    [DL_IR_OP_OR] = 7,
    [DL_IR_OP_MAX] = 8, // broadcasting since 8
    [DL_IR_OP_MIN] = 8,
    [DL_IR_OP_EXPAND] = 8,
    [DL_IR_OP_CAST] = 9,
    [DL_IR_OP_ERF] = 9,
    [DL_IR_OP_WHERE] = 9,
    [DL_IR_OP_BATCH_NORMALIZATION] = 9, // 14 added training_mode (default: inference, as 9)
    [DL_IR_OP_RESHAPE] = 5,             // 14 added allowzero (default 0: as 5)
    [DL_IR_OP_CONV] = 11,
    [DL_IR_OP_CONV_TRANSPOSE] = 11,
    [DL_IR_OP_AVERAGE_POOL] = 11,
    [DL_IR_OP_MAX_POOL] = 12,
    [DL_IR_OP_CLIP] = 11,       // min / max as inputs since 11
    [DL_IR_OP_GEMM] = 11,       // C optional since 11
    [DL_IR_OP_ARG_MAX] = 11,    // 12 added select_last_index (default 0: as 11)
    [DL_IR_OP_REDUCE_SUM] = 11, // negative axes since 11; axes became an input at 13
    [DL_IR_OP_REDUCE_MEAN] = 11,
    [DL_IR_OP_REDUCE_MAX] = 11,
    [DL_IR_OP_REDUCE_MIN] = 11,
    [DL_IR_OP_SQUEEZE] = 11,
    [DL_IR_OP_UNSQUEEZE] = 11,
    [DL_IR_OP_SPLIT] = 11,
    [DL_IR_OP_CONCAT] = 11,
    [DL_IR_OP_FLATTEN] = 11,
    [DL_IR_OP_GATHER] = 11,
    [DL_IR_OP_SLICE] = 11,
    [DL_IR_OP_PAD] = 11,    // pads as an input since 11
    [DL_IR_OP_SOFTMAX] = 1, // before 13 only with axis = -1 (check_model)
    [DL_IR_OP_LOG_SOFTMAX] = 1,
    [DL_IR_OP_DROPOUT] = 12, // ratio and training_mode as inputs since 12
    [DL_IR_OP_SOFTMAX_CROSS_ENTROPY_LOSS] = 12,
    [DL_IR_OP_NEGATIVE_LOG_LIKELIHOOD_LOSS] = 12,
    [DL_IR_OP_HARD_SWISH] = 14, // new ops: no node of an older opset can name them
    [DL_IR_OP_LAYER_NORMALIZATION] = 17,
};

static int64_t op_since_version(dl_ir_op op) {
    return op_since_table[op] ? op_since_table[op] : OPSET_MIN;
}

// The rank the graph declares for value `name` (a graph input or output, or a value_info), or -1.
static int64_t declared_rank(const Onnx__GraphProto *g, const char *name) {
    const Onnx__ValueInfoProto *const *lists[3] = {
        (const Onnx__ValueInfoProto *const *)g->input,
        (const Onnx__ValueInfoProto *const *)g->output,
        (const Onnx__ValueInfoProto *const *)g->value_info};
    size_t lens[3] = {g->n_input, g->n_output, g->n_value_info};
    for (int l = 0; l < 3; l++) {
        for (size_t i = 0; i < lens[l]; i++) {
            const Onnx__ValueInfoProto *vi = lists[l][i];
            if (vi->name && strcmp(vi->name, name) == 0 && vi->type &&
                vi->type->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE &&
                vi->type->tensor_type && vi->type->tensor_type->shape) {
                return (int64_t)vi->type->tensor_type->shape->n_dim;
            }
        }
    }
    return -1;
}

// Softmax and LogSoftmax before opset 13 flatten the input to 2-D at `axis` (default 1): the
// same as opset 13's only over the last axis: axis -1, or rank - 1 where the graph declares the
// rank of the node's input or output (PyTorch writes softmax(dim=-1) as axis = rank - 1).
static bool coerced_softmax_ok(const Onnx__GraphProto *g, const Onnx__NodeProto *nd) {
    int64_t axis = 1;
    for (size_t k = 0; k < nd->n_attribute; k++) {
        const Onnx__AttributeProto *a = nd->attribute[k];
        if (a->name && strcmp(a->name, "axis") == 0) {
            if (a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) {
                return false;
            }
            axis = a->i;
        }
    }
    if (axis == -1) {
        return true;
    }
    int64_t rank = nd->n_input > 0 && nd->input[0] ? declared_rank(g, nd->input[0]) : -1;
    if (rank < 0 && nd->n_output > 0 && nd->output[0]) {
        rank = declared_rank(g, nd->output[0]);
    }
    return rank > 0 && axis == rank - 1;
}

// ---------------------------------------------------------------------------------------------
// Shape-like operands: which ONNX input slots become attributes of ours. Slot 0 is always the
// data operand; a NULL entry stays an input.

#define SLOTS 5
typedef struct op_slots {
    const char *attr[SLOTS];
    size_t max_inputs;    // most ONNX inputs accepted (Pad's opset-18 `axes` is not)
    bool empty_is_absent; // an empty `axes` means the same as none: drop it, not `axes = []`
} op_slots;

static const op_slots slot_table[DL_IR_OP_COUNT] = {
    [DL_IR_OP_RESHAPE] = {{NULL, "shape"}, 2, false},
    [DL_IR_OP_EXPAND] = {{NULL, "shape"}, 2, false},
    [DL_IR_OP_SQUEEZE] = {{NULL, "axes"}, 2, true},
    [DL_IR_OP_UNSQUEEZE] = {{NULL, "axes"}, 2, false},
    [DL_IR_OP_REDUCE_SUM] = {{NULL, "axes"}, 2, true},
    [DL_IR_OP_REDUCE_MEAN] = {{NULL, "axes"}, 2, true},
    [DL_IR_OP_REDUCE_MAX] = {{NULL, "axes"}, 2, true},
    [DL_IR_OP_REDUCE_MIN] = {{NULL, "axes"}, 2, true},
    [DL_IR_OP_SPLIT] = {{NULL, "split"}, 2, false},
    [DL_IR_OP_PAD] = {{NULL, "pads"}, 3, false},
    [DL_IR_OP_SLICE] = {{NULL, "starts", "ends", "axes", "steps"}, 5, false},
};

static const char *attr_slot(dl_ir_op op, size_t slot) {
    return slot < SLOTS ? slot_table[op].attr[slot] : NULL;
}

static bool empty_attr_is_absent(dl_ir_op op) {
    return slot_table[op].empty_is_absent;
}

static size_t onnx_max_inputs(dl_ir_op op) {
    if (slot_table[op].max_inputs) {
        return slot_table[op].max_inputs;
    }
    int32_t mx = dl_ir_op_get_info(op)->max_inputs;
    return mx < 0 ? SIZE_MAX : (size_t)mx;
}

// ---------------------------------------------------------------------------------------------
// Protobuf decoding with bounds
//
// protobuf-c's unpack recurses once per nested message and allocates every message up front, so
// a hostile file can overflow the stack (thousands of nested If/Loop subgraphs or
// TypeProto.sequence_type) or make it allocate many times the file size (empty submessages).
// Before unpacking, pb_check walks the wire format iteratively, guided by the generated
// descriptors (a length-delimited field whose descriptor says MESSAGE is entered, anything else
// skipped), and refuses malformed framing and nesting deeper than PB_MAX_DEPTH (protobuf's own
// default recursion limit). The unpack then allocates through dl_mem_* (so fault injection
// reaches it) under a byte budget proportional to the input size.

#define PB_MAX_DEPTH 100
// Budget for protobuf-c's allocations: generous for real models (a node of a few bytes unpacks
// to ~150; packed int64 data to 8x), finite for hostile ones.
#define PB_BUDGET_FACTOR 32
#define PB_BUDGET_SLACK  ((size_t)256 << 20)

// Limits on counts, far above any real model, so that no loop of ours runs on absurd input.
#define ONNX_MAX_NODES       ((size_t)1 << 22)
#define ONNX_MAX_VALUES      ((size_t)1 << 22) // initializers, graph inputs / outputs
#define ONNX_MAX_NODE_ARGS   ((size_t)1 << 16) // inputs or outputs of one node
#define ONNX_MAX_NODE_ATTRS  ((size_t)1 << 12)
#define ONNX_MAX_ATTR_VALUES ((size_t)1 << 24) // ints / floats / strings of one attribute

typedef struct pb_frame {
    const uint8_t *end;
    const ProtobufCMessageDescriptor *desc;
} pb_frame;

// Reads a base-128 varint (at most 10 bytes) from [*p, end).
static bool pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 70; shift += 7) {
        if (*p >= end) {
            return false;
        }
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return true;
        }
    }
    return false;
}

// Checks framing and nesting depth of a serialized `desc` message; the reason goes into `why`.
static bool pb_check(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                     char *why, size_t why_size) {
    pb_frame stack[PB_MAX_DEPTH];
    size_t depth = 0;
    stack[0] = (pb_frame){data + len, desc};
    const uint8_t *p = data;
    for (;;) {
        if (p == stack[depth].end) {
            if (depth == 0) {
                return true;
            }
            depth--;
            continue;
        }
        const uint8_t *end = stack[depth].end;
        uint64_t key, v;
        if (!pb_varint(&p, end, &key) || (key >> 3) == 0 || (key >> 3) > UINT32_MAX) {
            snprintf(why, why_size, "malformed protobuf (bad field key at byte %zu)",
                     (size_t)(p - data));
            return false;
        }
        switch (key & 7) {
        case 0: // varint
            if (!pb_varint(&p, end, &v)) {
                snprintf(why, why_size, "malformed protobuf (bad varint at byte %zu)",
                         (size_t)(p - data));
                return false;
            }
            break;
        case 1: // fixed64
        case 5: // fixed32
            v = (key & 7) == 1 ? 8 : 4;
            if ((size_t)(end - p) < v) {
                snprintf(why, why_size, "malformed protobuf (truncated at byte %zu)",
                         (size_t)(p - data));
                return false;
            }
            p += v;
            break;
        case 2: { // length-delimited: a nested message, or bytes to skip
            if (!pb_varint(&p, end, &v) || v > (uint64_t)(end - p)) {
                snprintf(why, why_size, "malformed protobuf (bad length at byte %zu)",
                         (size_t)(p - data));
                return false;
            }
            const ProtobufCFieldDescriptor *fd =
                protobuf_c_message_descriptor_get_field(stack[depth].desc, (unsigned)(key >> 3));
            if (fd && fd->type == PROTOBUF_C_TYPE_MESSAGE) {
                if (depth + 1 >= PB_MAX_DEPTH) {
                    snprintf(why, why_size,
                             "messages nested more than %d deep (at byte %zu); refusing to "
                             "decode",
                             PB_MAX_DEPTH, (size_t)(p - data));
                    return false;
                }
                stack[++depth] = (pb_frame){p + v, fd->descriptor};
            } else {
                p += v;
            }
            break;
        }
        default: // groups (3, 4) are not used by ONNX; 6 and 7 do not exist
            snprintf(why, why_size, "malformed protobuf (wire type %u at byte %zu)",
                     (unsigned)(key & 7), (size_t)(p - data));
            return false;
        }
    }
}

typedef struct pb_budget {
    size_t used, limit;
    bool over;  // the budget refused an allocation
    bool nomem; // the allocator did
} pb_budget;

static void *pb_alloc(void *data, size_t size) {
    pb_budget *b = data;
    if (size > b->limit - b->used) {
        b->over = true;
        return NULL;
    }
    b->used += size;
    void *p = dl_mem_alloc(size ? size : 1);
    b->nomem = b->nomem || !p;
    return p;
}

static void pb_free(void *data, void *ptr) {
    (void)data;
    free(ptr);
}

// Frees what pb_decode returned (NULL is a no-op).
static void pb_release(void *msg) {
    if (msg) {
        ProtobufCAllocator a = {pb_alloc, pb_free, NULL}; // free never allocates
        protobuf_c_message_free_unpacked(msg, &a);
    }
}

// Decodes `len` bytes as a `desc` message: checked by pb_check first, unpacked through dl_mem_*
// under the budget. DL_ERR_PARSE (reason in `why`), DL_ERR_NOMEM.
static dl_status pb_decode(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len,
                           void **out, char *why, size_t why_size) {
    *out = NULL;
    if (!pb_check(desc, data, len, why, why_size)) {
        return DL_ERR_PARSE;
    }
    pb_budget b = {0, PB_BUDGET_SLACK, false, false};
    if (len <= (SIZE_MAX - PB_BUDGET_SLACK) / PB_BUDGET_FACTOR) {
        b.limit += len * PB_BUDGET_FACTOR;
    } else {
        b.limit = SIZE_MAX;
    }
    ProtobufCAllocator a = {pb_alloc, pb_free, &b};
    *out = protobuf_c_message_unpack(desc, &a, len, data);
    if (*out) {
        return DL_OK;
    }
    if (b.over) {
        snprintf(why, why_size, "decoding would take more than %zu bytes of memory", b.limit);
        return DL_ERR_PARSE;
    }
    if (b.nomem) {
        snprintf(why, why_size, "out of memory");
        return DL_ERR_NOMEM;
    }
    snprintf(why, why_size, "protobuf decoding failed");
    return DL_ERR_PARSE;
}

// ---------------------------------------------------------------------------------------------
// TensorProto decoding

// Decodes `tp` into *out (heap data, caller frees). `what` names the tensor in diagnostics.
// With u16_is_bf16, a UINT16 tensor is taken as bfloat16 bit patterns: ONNX's test data stores
// bfloat16 tensors that way because numpy has no bfloat16 type.
static dl_status tensor_from_proto(const Onnx__TensorProto *tp, const char *what, bool u16_is_bf16,
                                   dl_tensor *out, dl_diags *d) {
    memset(out, 0, sizeof(*out));
    dl_dtype dt;
    if (u16_is_bf16 && tp->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__UINT16) {
        dt = DL_DT_BFLOAT16;
    } else if (!dl_fe__dtype_from_onnx(tp->data_type, &dt)) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "onnx: %s has unsupported element type %s", what,
                onnx_dtype_name(tp->data_type));
        return DL_ERR_UNSUPPORTED;
    }
    if ((tp->has_data_location &&
         tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL) ||
        tp->n_external_data) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "onnx: %s uses external data, which is not supported",
                what);
        return DL_ERR_UNSUPPORTED;
    }
    if (tp->segment) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "onnx: %s is segmented, which is not supported", what);
        return DL_ERR_UNSUPPORTED;
    }
    if (tp->n_dims > DL_MAX_RANK) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "onnx: %s has rank %zu (at most %d supported)", what,
                tp->n_dims, DL_MAX_RANK);
        return DL_ERR_UNSUPPORTED;
    }
    // The declared size is checked against the data actually present before anything is
    // allocated: a [100000, 100000] tensor with no data must not cost 40 GB to refuse.
    size_t esz = dl_dtype_size(dt);
    bool has_zero = false;
    for (size_t i = 0; i < tp->n_dims; i++) {
        if (tp->dims[i] < 0) {
            dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "onnx: %s has negative dimension %lld", what,
                    (long long)tp->dims[i]);
            return DL_ERR_PARSE;
        }
        has_zero = has_zero || tp->dims[i] == 0;
    }
    uint64_t n = has_zero ? 0 : 1;
    for (size_t i = 0; i < tp->n_dims && n; i++) {
        uint64_t dim = (uint64_t)tp->dims[i];
        if (n > ((uint64_t)INT64_MAX / esz) / dim) {
            char shp[160];
            dl_shape_format(tp->dims, (int32_t)tp->n_dims, shp, sizeof shp);
            dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "onnx: %s has shape %s, too large", what, shp);
            return DL_ERR_PARSE;
        }
        n *= dim;
    }
    size_t have;
    if (tp->has_raw_data) {
        have = tp->raw_data.len / esz;
        if (tp->raw_data.len % esz != 0 || have != n) {
            char shp[160];
            dl_shape_format(tp->dims, (int32_t)tp->n_dims, shp, sizeof shp);
            dl_diag(d, DL_SEV_ERROR, DL_NO_LOC,
                    "onnx: %s: raw_data has %zu bytes, shape %s needs %llu elements of %zu bytes",
                    what, tp->raw_data.len, shp, (unsigned long long)n, esz);
            return DL_ERR_PARSE;
        }
    } else {
        switch (dt) {
        case DL_DT_FLOAT:
            have = tp->n_float_data;
            break;
        case DL_DT_INT64:
            have = tp->n_int64_data;
            break;
        case DL_DT_INT32:
        case DL_DT_FLOAT16: // 16-bit types travel as their bit patterns in int32_data
        case DL_DT_BFLOAT16:
        case DL_DT_BOOL:
            have = tp->n_int32_data;
            break;
        case DL_DT_COUNT:
        default:
            DL_UNREACHABLE();
        }
        if (have != n) {
            char shp[160];
            dl_shape_format(tp->dims, (int32_t)tp->n_dims, shp, sizeof shp);
            dl_diag(d, DL_SEV_ERROR, DL_NO_LOC,
                    "onnx: %s holds %zu values, its shape %s needs %llu", what, have, shp,
                    (unsigned long long)n);
            return DL_ERR_PARSE;
        }
    }
    dl_status st = dl_tensor_alloc(out, dt, (int32_t)tp->n_dims, tp->dims);
    if (st != DL_OK) {
        if (st == DL_ERR_INVALID_ARG) {
            dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "onnx: %s is too large", what);
            st = DL_ERR_PARSE;
        }
        return st;
    }
    if (tp->has_raw_data) {
        // ONNX raw_data is little-endian, as is every host we build for.
        if (n > 0) {
            memcpy(out->data, tp->raw_data.data, (size_t)n * esz);
        }
        if (dt == DL_DT_BOOL) {
            uint8_t *b = out->data;
            for (uint64_t i = 0; i < n; i++) {
                b[i] = b[i] != 0;
            }
        }
        return DL_OK;
    }
    if (n == 0) {
        return DL_OK;
    }
    switch (dt) {
    case DL_DT_FLOAT:
        memcpy(out->data, tp->float_data, (size_t)n * sizeof(float));
        break;
    case DL_DT_INT64:
        memcpy(out->data, tp->int64_data, (size_t)n * sizeof(int64_t));
        break;
    case DL_DT_INT32:
        memcpy(out->data, tp->int32_data, (size_t)n * sizeof(int32_t));
        break;
    case DL_DT_FLOAT16:
    case DL_DT_BFLOAT16: {
        uint16_t *h = out->data;
        for (uint64_t i = 0; i < n; i++) {
            h[i] = (uint16_t)(uint32_t)tp->int32_data[i];
        }
        break;
    }
    case DL_DT_BOOL: {
        uint8_t *b = out->data;
        for (uint64_t i = 0; i < n; i++) {
            b[i] = tp->int32_data[i] != 0;
        }
        break;
    }
    case DL_DT_COUNT:
    default:
        DL_UNREACHABLE();
    }
    return DL_OK;
}

dl_status dl_fe__onnx_read_tensor_pb(const char *path, dl_tensor *out, char *name, size_t name_size,
                                     dl_diags *d) {
    memset(out, 0, sizeof(*out));
    if (name && name_size) {
        name[0] = '\0';
    }
    char *buf = NULL;
    size_t len = 0;
    char rwhy[160];
    dl_status rst = dl_read_file_max(path, DL_READ_LIMIT_ONNX, &buf, &len, rwhy, sizeof rwhy);
    if (rst != DL_OK) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "cannot read %s: %s", path, rwhy);
        return rst == DL_ERR_NOMEM ? rst : DL_ERR_IO;
    }
    char why[256];
    Onnx__TensorProto *tp = NULL;
    dl_status st = pb_decode(&onnx__tensor_proto__descriptor, (const uint8_t *)buf, len,
                             (void **)&tp, why, sizeof why);
    free(buf);
    if (st != DL_OK) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "%s: not a valid ONNX TensorProto (%s)", path, why);
        return st;
    }
    if (name && name_size && tp->name) {
        snprintf(name, name_size, "%s", tp->name);
    }
    char what[512];
    snprintf(what, sizeof what, "tensor '%s' in %s", tp->name ? tp->name : "", path);
    st = tensor_from_proto(tp, what, true, out, d);
    pb_release(tp);
    return st;
}

// ---------------------------------------------------------------------------------------------
// Symbols: ONNX name -> what we know about the value

typedef struct sym {
    const char *onnx;      // BORROWED from the ModelProto
    dl_ir_value *v;        // emitted value, or NULL
    const dl_tensor *cval; // constant value (initializer, Constant node, bound input) or NULL
    dl_tensor *owned;      // cval when decoded by us (freed with the table), else NULL
    dl_fe_symel *se;       // folded cval: per-element dependence on named dims (NULL: literal)
    bool fold;             // computed by a node that the emit pass folds (see "Folding")
    dl_dtype kdt;          // dtype of a cval or fold value (plan pass)
    bool is_init;          // an initializer
    // Param aliases (see "Aliased initializers" below): the param-like sym an Identity node
    // copies (is_init or itself an alias), with the Identity node's index; NULL / -1 if none.
    struct sym *alias_of;
    int32_t alias_node;
    uint32_t n_uses;      // real-operand uses by nodes, plus one if listed as a graph output
    uint32_t n_stat_uses; // of which BatchNormalization running-statistic operands
    uint32_t stat_seen;   // stat uses emitted so far (emit pass)
    bool used;            // read as a real operand or listed as a graph output
    bool defined;         // known by now (plan pass, in graph order)
    int32_t graph_input;  // position among non-initializer graph inputs, or -1
    int32_t def_node;     // index of the producing node, or -1
} sym;

typedef struct imp {
    dl_diags *d;
    const Onnx__ModelProto *model;
    const Onnx__GraphProto *g;
    int64_t opset;
    dl_ir_module *m;
    bool as_consts;
    sym **slots; // open addressing, NULL = empty
    size_t cap, n;
    dl_fe_onnx_info *info;
    const char *const *bind_names;
    const dl_tensor *bind_values;
    size_t n_bind;
    size_t n_errors;
    struct ident_ent *ids; // identifiers handed out (see make_ident)
    size_t id_cap, id_n;
    dl_fe_shape_fn shape_fn; // per-node shape inference, or NULL (see "Folding")
    dl_diags *shape_d;       // its diagnostics, discarded (dlcc check reports them)
    int64_t sym_default;     // value given to a new named dim (1; the probe import uses another)
} imp;

static sym *sym_find(const imp *im, const char *name) {
    if (!im->cap) {
        return NULL;
    }
    size_t mask = im->cap - 1;
    for (size_t i = (size_t)dl_hash_fnv1a64(name) & mask; im->slots[i]; i = (i + 1) & mask) {
        if (strcmp(im->slots[i]->onnx, name) == 0) {
            return im->slots[i];
        }
    }
    return NULL;
}

static void sym_place(sym **slots, size_t cap, sym *s) {
    size_t mask = cap - 1;
    size_t i = (size_t)dl_hash_fnv1a64(s->onnx) & mask;
    while (slots[i]) {
        i = (i + 1) & mask;
    }
    slots[i] = s;
}

// Returns the sym for `name`, creating it if needed (NULL when out of memory).
static sym *sym_get(imp *im, const char *name) {
    sym *s = sym_find(im, name);
    if (s) {
        return s;
    }
    if ((im->n + 1) * 2 > im->cap) {
        size_t ncap = im->cap ? im->cap * 2 : 64;
        sym **ns = dl_mem_calloc(ncap, sizeof(sym *));
        if (!ns) {
            return NULL;
        }
        for (size_t i = 0; i < im->cap; i++) {
            if (im->slots[i]) {
                sym_place(ns, ncap, im->slots[i]);
            }
        }
        free(im->slots);
        im->slots = ns;
        im->cap = ncap;
    }
    s = dl_mem_calloc(1, sizeof(sym));
    if (!s) {
        return NULL;
    }
    s->onnx = name;
    s->graph_input = -1;
    s->def_node = -1;
    s->alias_node = -1;
    sym_place(im->slots, im->cap, s);
    im->n++;
    return s;
}

static void syms_free(imp *im) {
    for (size_t i = 0; i < im->cap; i++) {
        sym *s = im->slots[i];
        if (s) {
            if (s->owned) {
                dl_tensor_free(s->owned);
                free(s->owned);
            }
            free(s->se);
            free(s);
        }
    }
    free(im->slots);
    im->slots = NULL;
    im->cap = im->n = 0;
}

// ---------------------------------------------------------------------------------------------
// Diagnostics helpers

static void node_desc(const Onnx__NodeProto *nd, size_t idx, char *buf, size_t size) {
    if (nd->name && nd->name[0]) {
        snprintf(buf, size, "node %zu '%s' (%s)", idx, nd->name, nd->op_type ? nd->op_type : "");
    } else {
        snprintf(buf, size, "node %zu (%s)", idx, nd->op_type ? nd->op_type : "");
    }
}

static void err(imp *im, const char *fmt, ...) DL_PRINTF(2, 3);
static void err(imp *im, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    dl_vdiag(im->d, DL_SEV_ERROR, DL_NO_LOC, fmt, ap);
    va_end(ap);
    im->n_errors++;
}

// ---------------------------------------------------------------------------------------------
// Names

static bool ident_start(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

static bool ident_char(char c) {
    return ident_start(c) || (c >= '0' && c <= '9') || c == '.';
}

// A valid .dlg identifier for ONNX name `src` as a heap string (NULL on OOM): invalid characters
// become '_', a leading digit gets a 'v' prefix, an empty name becomes "_".
static char *sanitize(const char *src) {
    size_t n = strlen(src);
    char *base = dl_mem_alloc(n + 2);
    if (!base) {
        return NULL;
    }
    size_t o = 0;
    if (n == 0) {
        base[o++] = '_';
    } else if (src[0] >= '0' && src[0] <= '9') {
        base[o++] = 'v';
    }
    for (size_t i = 0; i < n; i++) {
        bool ok = o == 0 ? ident_start(src[i]) : ident_char(src[i]);
        base[o++] = ok ? src[i] : '_';
    }
    base[o] = '\0';
    return base;
}

// Every identifier handed out by make_ident (heap keys), each with the next suffix to try when
// it is wanted again as a base, so that n clashing names cost O(n), not O(n^2) (a hostile
// model can have millions of names that sanitize alike).
typedef struct ident_ent {
    char *key;
    unsigned next;
} ident_ent;

static ident_ent *ident_find(const imp *im, const char *key) {
    if (!im->id_cap) {
        return NULL;
    }
    size_t mask = im->id_cap - 1;
    for (size_t i = (size_t)dl_hash_fnv1a64(key) & mask; im->ids[i].key; i = (i + 1) & mask) {
        if (strcmp(im->ids[i].key, key) == 0) {
            return &im->ids[i];
        }
    }
    return NULL;
}

// Records `key` (ownership passes to the table on success; false when out of memory).
static bool ident_add(imp *im, char *key) {
    if ((im->id_n + 1) * 2 > im->id_cap) {
        size_t ncap = im->id_cap ? im->id_cap * 2 : 64;
        ident_ent *ne = dl_mem_calloc(ncap, sizeof *ne);
        if (!ne) {
            return false;
        }
        for (size_t i = 0; i < im->id_cap; i++) {
            if (im->ids[i].key) {
                size_t j = (size_t)dl_hash_fnv1a64(im->ids[i].key) & (ncap - 1);
                while (ne[j].key) {
                    j = (j + 1) & (ncap - 1);
                }
                ne[j] = im->ids[i];
            }
        }
        free(im->ids);
        im->ids = ne;
        im->id_cap = ncap;
    }
    size_t j = (size_t)dl_hash_fnv1a64(key) & (im->id_cap - 1);
    while (im->ids[j].key) {
        j = (j + 1) & (im->id_cap - 1);
    }
    im->ids[j] = (ident_ent){key, 1};
    im->id_n++;
    return true;
}

static void idents_free(imp *im) {
    for (size_t i = 0; i < im->id_cap; i++) {
        free(im->ids[i].key);
    }
    free(im->ids);
    im->ids = NULL;
    im->id_cap = im->id_n = 0;
}

static bool ident_taken(const imp *im, const char *name) {
    return ident_find(im, name) || dl_ir_module_find(im->m, name);
}

// Like sanitize, and unused in the module and by any identifier handed out before (a clash gets
// "_<n>" appended, the smallest n free). The result is a heap string the caller frees.
static char *make_ident(imp *im, const char *src) {
    char *base = sanitize(src);
    if (!base) {
        return NULL;
    }
    char *id = base;
    if (ident_taken(im, base)) {
        size_t o = strlen(base);
        id = dl_mem_alloc(o + 24);
        if (!id) {
            free(base);
            return NULL;
        }
        // Suffixes below `next` were taken when tried and names are never given back.
        ident_ent *e = ident_find(im, base);
        unsigned k = e ? e->next : 1;
        for (;; k++) {
            snprintf(id, o + 24, "%s_%u", base, k);
            if (!ident_taken(im, id)) {
                break;
            }
        }
        if (!e) {
            char *kb = base;
            base = NULL;
            if (!ident_add(im, kb)) {
                free(kb);
                free(id);
                return NULL;
            }
            e = ident_find(im, kb);
        }
        e->next = k + 1;
        free(base);
    }
    char *copy = dl_mem_strdup(id);
    if (!copy || !ident_add(im, copy)) {
        free(copy);
        free(id);
        return NULL;
    }
    return id;
}

// ---------------------------------------------------------------------------------------------
// Attribute values

// The double nearest to the shortest decimal that reads back as `f`, so 0.1f prints as 0.1.
static double tidy_float(float f) {
    if (!isfinite(f)) {
        return (double)f;
    }
    char buf[32];
    for (int p = 6; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)f);
        double v = strtod(buf, NULL);
        if ((float)v == f) {
            return v;
        }
    }
    return (double)f;
}

// Integer contents of a constant shape-like operand.
static bool const_ints(const dl_tensor *t, int64_t *vals) {
    int64_t n = dl_tensor_numel(t);
    if (t->dtype == DL_DT_INT64) {
        memcpy(vals, t->data, (size_t)n * sizeof(int64_t));
        return true;
    }
    if (t->dtype == DL_DT_INT32) {
        for (int64_t i = 0; i < n; i++) {
            vals[i] = ((const int32_t *)t->data)[i];
        }
        return true;
    }
    return false;
}

// ---------------------------------------------------------------------------------------------
// Plan pass: checks and facts, no module changes

// Decodes a Constant node's value into a new heap tensor.
static dl_status constant_value(imp *im, const Onnx__NodeProto *nd, const char *desc,
                                dl_tensor **out) {
    *out = NULL;
    if (nd->n_attribute != 1) {
        err(im, "onnx: %s: expected exactly one value attribute", desc);
        return DL_ERR_UNSUPPORTED;
    }
    const Onnx__AttributeProto *a = nd->attribute[0];
    dl_tensor *t = dl_mem_calloc(1, sizeof(dl_tensor));
    if (!t) {
        return DL_ERR_NOMEM;
    }
    dl_status st = DL_OK;
    const char *an = a->name ? a->name : "";
    if (strcmp(an, "value") == 0 && a->t) {
        char what[320];
        snprintf(what, sizeof what, "%s value", desc);
        st = tensor_from_proto(a->t, what, false, t, im->d);
        if (st != DL_OK) {
            im->n_errors++;
        }
    } else if (strcmp(an, "value_float") == 0) {
        st = dl_tensor_alloc(t, DL_DT_FLOAT, 0, NULL);
        if (st == DL_OK) {
            *(float *)t->data = a->f;
        }
    } else if (strcmp(an, "value_int") == 0) {
        st = dl_tensor_alloc(t, DL_DT_INT64, 0, NULL);
        if (st == DL_OK) {
            *(int64_t *)t->data = a->i;
        }
    } else if (strcmp(an, "value_floats") == 0 || strcmp(an, "value_ints") == 0) {
        bool is_f = an[6] == 'f';
        int64_t n = (int64_t)(is_f ? a->n_floats : a->n_ints);
        st = dl_tensor_alloc(t, is_f ? DL_DT_FLOAT : DL_DT_INT64, 1, &n);
        if (st == DL_OK && n > 0) {
            memcpy(t->data, is_f ? (const void *)a->floats : (const void *)a->ints,
                   (size_t)n * (is_f ? sizeof(float) : sizeof(int64_t)));
        }
    } else {
        err(im, "onnx: %s: attribute '%s' is not supported", desc, an);
        st = DL_ERR_UNSUPPORTED;
    }
    if (st != DL_OK) {
        free(t);
        return st;
    }
    *out = t;
    return DL_OK;
}

// First check, shared with dl_fe__onnx_probe: is this model within our spec at all?
// Returns DL_OK, or DL_ERR_UNSUPPORTED / DL_ERR_PARSE with a reason in `why`.
// The unsupported ops of a model, by kind, so that one import reports all of them at once.
typedef struct unsupported_op {
    const char *domain, *op; // BORROWED from the model
    char first[300];         // the first node's description
    size_t count;
} unsupported_op;

enum { MAX_UNSUPPORTED_KINDS = 32 };

static void note_unsupported(unsupported_op *u, size_t *n_kinds, size_t *n_more, const char *dom,
                             const char *opn, const char *desc) {
    for (size_t k = 0; k < *n_kinds; k++) {
        if (!strcmp(u[k].op, opn) && !strcmp(u[k].domain, dom)) {
            u[k].count++;
            return;
        }
    }
    if (*n_kinds == MAX_UNSUPPORTED_KINDS) {
        (*n_more)++;
        return;
    }
    unsupported_op *e = &u[(*n_kinds)++];
    e->domain = dom;
    e->op = opn;
    e->count = 1;
    snprintf(e->first, sizeof e->first, "%s", desc);
}

// "NODE: op 'X' is not supported (N nodes)" per kind, joined with "; ", into why.
static void describe_unsupported(const unsupported_op *u, size_t n_kinds, size_t n_more, char *why,
                                 size_t why_size) {
    size_t at = 0;
    if (n_kinds > 1 || n_more) {
        at += (size_t)snprintf(why, why_size,
                               "%zu kinds of op are not supported: ", n_kinds + n_more);
    }
    for (size_t k = 0; k < n_kinds && at < why_size; k++) {
        char count[64] = "";
        if (u[k].count > 1) {
            snprintf(count, sizeof count, " (%zu nodes)", u[k].count);
        }
        if (u[k].domain[0]) {
            at += (size_t)snprintf(why + at, why_size - at, "%s%s: domain '%s' is not supported%s",
                                   k ? "; " : "", u[k].first, u[k].domain, count);
        } else {
            at += (size_t)snprintf(why + at, why_size - at, "%s%s: op '%s' is not supported%s",
                                   k ? "; " : "", u[k].first, u[k].op, count);
        }
    }
    if (n_more && at < why_size) {
        snprintf(why + at, why_size - at, "; and %zu more kinds", n_more);
    }
}

static bool decomposed_op(const char *opn);
static bool decomposed_known_slot(const char *opn, size_t k);

// ONNX ops that are not ops of the graph format: shape computations folded at import (see
// "Folding"). Shape and Size need opset 1, ConstantOfShape 9, Range 11.
static bool import_only_op(const char *opn) {
    return !strcmp(opn, "Shape") || !strcmp(opn, "Size") || !strcmp(opn, "ConstantOfShape") ||
           !strcmp(opn, "Range");
}

static dl_status check_model(const Onnx__ModelProto *mp, int64_t *out_opset, char *why,
                             size_t why_size) {
    if (!mp->graph) {
        snprintf(why, why_size, "model has no graph");
        return DL_ERR_PARSE;
    }
    int64_t opset = -1;
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const Onnx__OperatorSetIdProto *os = mp->opset_import[i];
        const char *dom = os->domain ? os->domain : "";
        if (dom[0] == '\0' || strcmp(dom, "ai.onnx") == 0) {
            opset = os->has_version ? os->version : 0;
        }
    }
    if (opset < 0) {
        snprintf(why, why_size, "model imports no opset of the default ONNX domain");
        return DL_ERR_UNSUPPORTED;
    }
    if (opset > OPSET_MAX || opset < 1) {
        snprintf(why, why_size,
                 "opset %lld is not supported (opsets 1-%d: %d-%d as a whole, older ones op by "
                 "op)",
                 (long long)opset, OPSET_MAX, OPSET_MIN, OPSET_MAX);
        return DL_ERR_UNSUPPORTED;
    }
    *out_opset = opset;
    const Onnx__GraphProto *g = mp->graph;
    if (g->n_node > ONNX_MAX_NODES) {
        snprintf(why, why_size, "graph has %zu nodes (at most %zu supported)", g->n_node,
                 ONNX_MAX_NODES);
        return DL_ERR_UNSUPPORTED;
    }
    size_t counts[3] = {g->n_initializer, g->n_input, g->n_output};
    static const char *const count_names[3] = {"initializers", "inputs", "outputs"};
    for (int k = 0; k < 3; k++) {
        if (counts[k] > ONNX_MAX_VALUES) {
            snprintf(why, why_size, "graph has %zu %s (at most %zu supported)", counts[k],
                     count_names[k], ONNX_MAX_VALUES);
            return DL_ERR_UNSUPPORTED;
        }
    }
    unsupported_op *unsup = dl_mem_calloc(MAX_UNSUPPORTED_KINDS, sizeof *unsup);
    size_t n_unsup = 0, n_more = 0;
    if (!unsup) {
        snprintf(why, why_size, "out of memory");
        return DL_ERR_NOMEM;
    }
    dl_status st = DL_OK;
    for (size_t i = 0; i < g->n_node && st == DL_OK; i++) {
        const Onnx__NodeProto *nd = g->node[i];
        char desc[300];
        node_desc(nd, i, desc, sizeof desc);
        if (nd->n_input > ONNX_MAX_NODE_ARGS || nd->n_output > ONNX_MAX_NODE_ARGS ||
            nd->n_attribute > ONNX_MAX_NODE_ATTRS) {
            snprintf(why, why_size,
                     "%s has %zu inputs, %zu outputs and %zu attributes (at most %zu, %zu and "
                     "%zu supported)",
                     desc, nd->n_input, nd->n_output, nd->n_attribute, ONNX_MAX_NODE_ARGS,
                     ONNX_MAX_NODE_ARGS, ONNX_MAX_NODE_ATTRS);
            st = DL_ERR_UNSUPPORTED;
            goto checked;
        }
        for (size_t k = 0; k < nd->n_attribute; k++) {
            const Onnx__AttributeProto *a = nd->attribute[k];
            if (a->n_ints > ONNX_MAX_ATTR_VALUES || a->n_floats > ONNX_MAX_ATTR_VALUES ||
                a->n_strings > ONNX_MAX_ATTR_VALUES) {
                snprintf(why, why_size, "%s: attribute '%s' holds more than %zu values", desc,
                         a->name ? a->name : "", ONNX_MAX_ATTR_VALUES);
                st = DL_ERR_UNSUPPORTED;
                goto checked;
            }
        }
        const char *dom = nd->domain ? nd->domain : "";
        const char *opn = nd->op_type ? nd->op_type : "";
        if (dom[0] != '\0' && strcmp(dom, "ai.onnx") != 0) {
            note_unsupported(unsup, &n_unsup, &n_more, dom, opn, desc);
            continue;
        }
        dl_ir_op op;
        if (strcmp(opn, "Constant") == 0) {
            if (nd->n_attribute == 1 && nd->attribute[0]->t) {
                dl_dtype dt;
                if (!dl_fe__dtype_from_onnx(nd->attribute[0]->t->data_type, &dt)) {
                    snprintf(why, why_size, "%s: element type %s is not supported", desc,
                             onnx_dtype_name(nd->attribute[0]->t->data_type));
                    st = DL_ERR_UNSUPPORTED;
                    goto checked;
                }
            }
            continue;
        }
        if (import_only_op(opn) || decomposed_op(opn)) {
            continue;
        }
        if (!dl_ir_op_from_name(opn, &op) || dl_ir_op_is_internal(op)) {
            note_unsupported(unsup, &n_unsup, &n_more, "", opn, desc);
            continue;
        }
        if (opset < OPSET_MIN && (op == DL_IR_OP_SOFTMAX || op == DL_IR_OP_LOG_SOFTMAX) &&
            !coerced_softmax_ok(g, nd)) {
            snprintf(why, why_size,
                     "%s: %s of opset %lld flattens its input to 2-D at `axis`; only the last axis "
                     "(axis = -1, or rank - 1 where the graph declares the rank: the same as "
                     "opset 13's) is supported",
                     desc, opn, (long long)opset);
            st = DL_ERR_UNSUPPORTED;
            goto checked;
        }
        if (op_since_version(op) > opset && op_since_version(op) > OPSET_MIN) {
            snprintf(why, why_size, "%s: %s is not in opset %lld (it came with opset %lld)", desc,
                     opn, (long long)opset, (long long)op_since_version(op));
            st = DL_ERR_UNSUPPORTED;
            goto checked;
        }
        if (op_since_version(op) > opset) {
            snprintf(why, why_size,
                     "%s: opset %lld uses an older definition of %s, which means something else "
                     "(supported: %s from opset %lld)",
                     desc, (long long)opset, opn, opn, (long long)op_since_version(op));
            st = DL_ERR_UNSUPPORTED;
            goto checked;
        }
        if (op == DL_IR_OP_BATCH_NORMALIZATION && opset < 14 && nd->n_output > 1) {
            snprintf(why, why_size,
                     "%s: BatchNormalization of opset %lld in training mode (%zu outputs) has "
                     "other outputs than opset 14's; only inference (one output) is supported",
                     desc, (long long)opset, nd->n_output);
            st = DL_ERR_UNSUPPORTED;
            goto checked;
        }
        if (op == DL_IR_OP_CAST) {
            for (size_t k = 0; k < nd->n_attribute; k++) {
                const Onnx__AttributeProto *a = nd->attribute[k];
                dl_dtype dt;
                if (a->name && strcmp(a->name, "to") == 0 &&
                    !dl_fe__dtype_from_onnx((int32_t)a->i, &dt)) {
                    snprintf(why, why_size, "%s: cast to %s is not supported", desc,
                             onnx_dtype_name((int32_t)a->i));
                    st = DL_ERR_UNSUPPORTED;
                    goto checked;
                }
            }
        }
    }
checked:
    if (st == DL_OK && (n_unsup || n_more)) {
        describe_unsupported(unsup, n_unsup, n_more, why, why_size);
        st = DL_ERR_UNSUPPORTED;
    }
    free(unsup);
    if (st != DL_OK) {
        return st;
    }
    const Onnx__ValueInfoProto *const *lists[2] = {(const Onnx__ValueInfoProto *const *)g->input,
                                                   (const Onnx__ValueInfoProto *const *)g->output};
    size_t lens[2] = {g->n_input, g->n_output};
    for (int l = 0; l < 2; l++) {
        for (size_t i = 0; i < lens[l]; i++) {
            const Onnx__ValueInfoProto *vi = lists[l][i];
            const Onnx__TypeProto *tp = vi->type;
            const char *nm = vi->name ? vi->name : "";
            if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type) {
                snprintf(why, why_size, "graph %s '%s' is not a tensor", l ? "output" : "input",
                         nm);
                return DL_ERR_UNSUPPORTED;
            }
            dl_dtype dt;
            if (!dl_fe__dtype_from_onnx(tp->tensor_type->elem_type, &dt)) {
                snprintf(why, why_size, "graph %s '%s' has unsupported element type %s",
                         l ? "output" : "input", nm, onnx_dtype_name(tp->tensor_type->elem_type));
                return DL_ERR_UNSUPPORTED;
            }
        }
    }
    for (size_t i = 0; i < g->n_initializer; i++) {
        dl_dtype dt;
        if (!dl_fe__dtype_from_onnx(g->initializer[i]->data_type, &dt)) {
            snprintf(why, why_size, "initializer '%s' has unsupported element type %s",
                     g->initializer[i]->name ? g->initializer[i]->name : "",
                     onnx_dtype_name(g->initializer[i]->data_type));
            return DL_ERR_UNSUPPORTED;
        }
    }
    if (g->n_sparse_initializer) {
        snprintf(why, why_size, "sparse initializers are not supported");
        return DL_ERR_UNSUPPORTED;
    }
    return DL_OK;
}

// Decodes an in-memory .onnx image (`path` names it in messages).
static dl_status load_model_mem(const void *data, size_t len, const char *path,
                                Onnx__ModelProto **out, char *why, size_t why_size) {
    char reason[256];
    dl_status st =
        pb_decode(&onnx__model_proto__descriptor, data, len, (void **)out, reason, sizeof reason);
    if (st != DL_OK) {
        snprintf(why, why_size, "%s: not a valid ONNX model (%s)", path, reason);
    }
    return st;
}

static dl_status load_model(const char *path, Onnx__ModelProto **out, char *why, size_t why_size) {
    *out = NULL;
    char *buf = NULL;
    size_t len = 0;
    char rwhy[160];
    // DL_READ_LIMIT_ONNX (2 GiB, protobuf's limit); a FIFO or device is refused, not read forever.
    dl_status rst = dl_read_file_max(path, DL_READ_LIMIT_ONNX, &buf, &len, rwhy, sizeof rwhy);
    if (rst != DL_OK) {
        snprintf(why, why_size, "cannot read %s: %s", path, rwhy);
        return rst == DL_ERR_NOMEM ? rst : DL_ERR_IO;
    }
    dl_status st = load_model_mem(buf, len, path, out, why, why_size);
    free(buf);
    return st;
}

dl_status dl_fe__onnx_probe(const char *path, char *why, size_t why_size) {
    Onnx__ModelProto *mp;
    dl_status st = load_model(path, &mp, why, why_size);
    if (st == DL_OK) {
        int64_t opset;
        st = check_model(mp, &opset, why, why_size);
        pb_release(mp);
    }
    return st;
}

static bool record_need_const(imp *im, const sym *s) {
    dl_fe_onnx_info *info = im->info;
    if (!info) {
        return true;
    }
    for (size_t i = 0; i < info->n_need_const; i++) {
        if (info->need_const[i] == s->graph_input) {
            return true;
        }
    }
    size_t n = info->n_need_const + 1;
    int32_t *pos = dl_mem_realloc(info->need_const, n * sizeof(int32_t));
    if (!pos) {
        return false;
    }
    info->need_const = pos;
    char **names = dl_mem_realloc(info->need_const_names, n * sizeof(char *));
    if (!names) {
        return false;
    }
    info->need_const_names = names;
    char *nm = dl_mem_alloc(strlen(s->onnx) + 1);
    if (!nm) {
        return false;
    }
    strcpy(nm, s->onnx);
    pos[n - 1] = s->graph_input;
    names[n - 1] = nm;
    info->n_need_const = n;
    return true;
}

// ---------------------------------------------------------------------------------------------
// Aliased initializers
//
// Params must be independent tensors: training updates each in place (BatchNormalization's
// running statistics become the new values of their params). Exporters do not keep that
// promise: torch.onnx.export merges initializers with equal values, so a fresh BatchNorm's
// running_var (all ones) arrives as `running_var = Identity(weight)`, and a model may name one
// initializer as two running statistics. Two rules, for params only (with --consts nothing is
// updated and nothing is copied):
//  - Identity of an initializer (or of such an alias) becomes a param of its own, named after
//    the Identity's output, holding a copy of the value; the Identity node is dropped.
//  - A running-statistic operand (BatchNormalization inputs 3 and 4) whose param has other
//    uses gets a copy of its own (when every use is a statistic, the first keeps the original).
//    Plain weights used twice stay shared: that is how exporters write tied weights.
// Each copy is reported as a note.

static bool is_stat_slot(dl_ir_op op, size_t slot) {
    return op == DL_IR_OP_BATCH_NORMALIZATION && (slot == 3 || slot == 4);
}

static bool param_like(const sym *s) {
    return s && (s->is_init || s->alias_of) && s->cval;
}

// The initializer (or alias) that Identity node `nd` copies, when it is to become a param.
static sym *param_alias_source(const imp *im, const Onnx__NodeProto *nd, dl_ir_op op) {
    if (im->as_consts || op != DL_IR_OP_IDENTITY || nd->n_input != 1 || nd->n_output != 1 ||
        !nd->input[0] || !nd->output[0] || !nd->output[0][0]) {
        return NULL;
    }
    sym *src = sym_find(im, nd->input[0]);
    return src && src->defined && param_like(src) ? src : NULL;
}

// The initializer an alias chain starts from.
static const sym *alias_root(const sym *s) {
    while (s->alias_of) {
        s = s->alias_of;
    }
    return s;
}

// ---------------------------------------------------------------------------------------------
// Folding
//
// Shape computations are evaluated at import (onnx_fold.c): a node is folded when every input is
// a constant or itself folded and its values are integers or bools (Cast from them to any type;
// ConstantOfShape of any value), plus `Shape` and `Size` of any value whose shape is known. The
// plan pass marks such nodes (sym.fold) without marking their inputs used, so constants that only
// feed shape computations never reach the module; the emit pass evaluates them in order. Shapes
// of computed values come from the caller's shape hook (dl_fe_shape_fn), run on every node as it
// is emitted. A folded value keeps, per element, how it depends on named dims (dl_fe_symel):
// `dim` itself becomes a dim name in an attribute, `k * dim` can be a Reshape's one inferred -1,
// anything else is an error naming the dim. As a safety net for dependences that are not tracked
// (a dim whose value came from a named dim through an op that does not keep its name), a model
// with named dims is imported a second time with other dim values and both texts must agree.

static bool int_dtype(dl_dtype t) {
    return t == DL_DT_INT64 || t == DL_DT_INT32 || t == DL_DT_BOOL;
}

// A value is known at import: a constant or a folded node's result.
static bool known_value(const sym *s) {
    return s && s->defined && (s->cval || s->fold);
}

static dl_dtype known_dtype(const sym *s) {
    return s->cval ? s->cval->dtype : s->kdt;
}

int64_t dl_fe__onnx_int_attr(const Onnx__NodeProto *nd, const char *name, int64_t def) {
    for (size_t k = 0; k < nd->n_attribute; k++) {
        const Onnx__AttributeProto *a = nd->attribute[k];
        if (a->name && strcmp(a->name, name) == 0 &&
            a->type == ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT) {
            return a->i;
        }
    }
    return def;
}

// The dtype of ConstantOfShape's value (float 0 by default).
static dl_dtype cos_dtype(const Onnx__NodeProto *nd) {
    dl_dtype dt = DL_DT_FLOAT;
    for (size_t k = 0; k < nd->n_attribute; k++) {
        const Onnx__AttributeProto *a = nd->attribute[k];
        if (a->name && strcmp(a->name, "value") == 0 && a->t &&
            !dl_fe__dtype_from_onnx(a->t->data_type, &dt)) {
            dt = DL_DT_FLOAT;
        }
    }
    return dt;
}

// Whether node `nd` is folded at import (its result's dtype in *kdt).
static bool plan_fold(const imp *im, const Onnx__NodeProto *nd, const char *opn, dl_dtype *kdt) {
    if (!strcmp(opn, "Shape") || !strcmp(opn, "Size")) {
        *kdt = DL_DT_INT64;
        return true;
    }
    if (!strcmp(opn, "ConstantOfShape")) {
        *kdt = cos_dtype(nd);
        return int_dtype(*kdt);
    }
    if (!dl_fe__onnx_foldable(opn) || nd->n_input == 0 || nd->n_output != 1) {
        return false;
    }
    bool all_int = true;
    dl_dtype first = DL_DT_INT64;
    for (size_t k = 0; k < nd->n_input; k++) {
        const char *in = nd->input[k] ? nd->input[k] : "";
        if (!in[0]) {
            continue;
        }
        const sym *s = sym_find(im, in);
        if (!known_value(s)) {
            return false;
        }
        if (k == 0) {
            first = known_dtype(s);
        }
        all_int = all_int && int_dtype(known_dtype(s));
    }
    if (!all_int && strcmp(opn, "Range") != 0) {
        return false;
    }
    if (!strcmp(opn, "Cast")) {
        int64_t to = dl_fe__onnx_int_attr(nd, "to", 0);
        return dl_fe__dtype_from_onnx((int32_t)to, kdt);
    }
    if (!strcmp(opn, "Equal") || !strcmp(opn, "Less") || !strcmp(opn, "Greater") ||
        !strcmp(opn, "Not")) {
        *kdt = DL_DT_BOOL;
    } else if (!strcmp(opn, "Where")) {
        const sym *s = nd->n_input > 1 && nd->input[1] ? sym_find(im, nd->input[1]) : NULL;
        *kdt = s ? known_dtype(s) : DL_DT_INT64;
    } else {
        *kdt = first;
    }
    return true;
}

// Inputs of a folded node (or another import-only op) must be known at import, except the data
// operand of Shape and Size, whose shape is enough.
static dl_status plan_fold_inputs(imp *im, const Onnx__NodeProto *nd, const char *desc,
                                  const char *opn) {
    if (!strcmp(opn, "Shape") || !strcmp(opn, "Size")) {
        return DL_OK;
    }
    for (size_t k = 0; k < nd->n_input; k++) {
        const char *in = nd->input[k] ? nd->input[k] : "";
        if (!in[0]) {
            continue;
        }
        sym *s = sym_find(im, in);
        if (!s || !s->defined) {
            err(im, "onnx: %s: input %zu '%s' is not defined before use", desc, k, in);
        } else if (!known_value(s)) {
            if (s->graph_input >= 0) {
                err(im, "onnx: %s: input %zu must be known at import, but graph input '%s' is not",
                    desc, k, in);
                if (!record_need_const(im, s)) {
                    return DL_ERR_NOMEM;
                }
            } else {
                err(im,
                    "onnx: %s: input %zu must be known at import, but '%s' is computed by node "
                    "%d, which is not a shape computation",
                    desc, k, in, s->def_node);
            }
        }
    }
    return DL_OK;
}

static dl_status plan(imp *im) {
    const Onnx__GraphProto *g = im->g;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *tp = g->initializer[i];
        const char *nm = tp->name ? tp->name : "";
        sym *s = sym_get(im, nm);
        if (!s) {
            return DL_ERR_NOMEM;
        }
        if (s->is_init) {
            err(im, "onnx: initializer '%s' is defined twice", nm);
            continue;
        }
        dl_tensor *t = dl_mem_calloc(1, sizeof(dl_tensor));
        if (!t) {
            return DL_ERR_NOMEM;
        }
        char what[300];
        snprintf(what, sizeof what, "initializer '%s'", nm);
        dl_status st = tensor_from_proto(tp, what, false, t, im->d);
        if (st != DL_OK) {
            free(t);
            if (st == DL_ERR_NOMEM) {
                return st;
            }
            im->n_errors++;
            continue;
        }
        s->cval = s->owned = t;
        s->is_init = true;
        s->defined = true;
    }
    int32_t pos = 0;
    for (size_t i = 0; i < g->n_input; i++) {
        const char *nm = g->input[i]->name ? g->input[i]->name : "";
        sym *s = sym_get(im, nm);
        if (!s) {
            return DL_ERR_NOMEM;
        }
        if (s->is_init) {
            continue; // an initializer listed as an input too (IR version < 4 style)
        }
        if (s->defined) {
            err(im, "onnx: graph input '%s' is listed twice", nm);
            continue;
        }
        s->graph_input = pos++;
        s->defined = true;
        for (size_t k = 0; k < im->n_bind; k++) {
            if (strcmp(im->bind_names[k], nm) == 0) {
                s->cval = &im->bind_values[k];
            }
        }
    }
    if (im->info) {
        im->info->n_graph_inputs = (size_t)pos;
    }
    for (size_t i = 0; i < g->n_node; i++) {
        const Onnx__NodeProto *nd = g->node[i];
        char desc[300];
        node_desc(nd, i, desc, sizeof desc);
        const char *opn = nd->op_type ? nd->op_type : "";
        bool is_const = strcmp(opn, "Constant") == 0;
        bool is_imp = import_only_op(opn);
        bool is_dec = decomposed_op(opn);
        dl_ir_op op = DL_IR_OP_IDENTITY;
        if (!is_const && !is_imp && !is_dec && !dl_ir_op_from_name(opn, &op)) {
            err(im, "onnx: %s: op '%s' is not supported", desc, opn); // check_model ran first
            continue;
        }
        if (!is_const && !is_imp && !is_dec && nd->n_input > onnx_max_inputs(op)) {
            err(im, "onnx: %s: %zu inputs given, at most %zu supported", desc, nd->n_input,
                onnx_max_inputs(op));
        }
        sym *alias_src = is_imp || is_dec ? NULL : param_alias_source(im, nd, op);
        dl_dtype kdt = DL_DT_INT64;
        bool fold = !is_const && !is_dec && !alias_src && plan_fold(im, nd, opn, &kdt);
        if (is_imp || fold) {
            DL_TRY(plan_fold_inputs(im, nd, desc, opn));
        }
        for (size_t k = 0; k < nd->n_input && !is_const && !alias_src && !is_imp && !fold; k++) {
            const char *in = nd->input[k] ? nd->input[k] : "";
            if (in[0] == '\0') {
                continue; // omitted optional input
            }
            sym *s = sym_find(im, in);
            if (!s || !s->defined) {
                err(im, "onnx: %s: input %zu '%s' is not defined before use", desc, k, in);
                continue;
            }
            if (is_dec && decomposed_known_slot(opn, k)) {
                if (!known_value(s)) {
                    err(im, "onnx: %s: input %zu '%s' must be known at import", desc, k, in);
                    if (s->graph_input >= 0 && !record_need_const(im, s)) {
                        return DL_ERR_NOMEM;
                    }
                }
                continue;
            }
            const char *an = is_dec ? NULL : attr_slot(op, k);
            if (!an) {
                s->used = true;
                s->n_uses++;
                s->n_stat_uses += is_stat_slot(op, k);
                continue;
            }
            if (!s->cval && s->fold) {
                if (!int_dtype(s->kdt)) {
                    err(im, "onnx: %s: input %zu ('%s') must hold integers, not %s", desc, k, an,
                        dl_dtype_name(s->kdt));
                }
            } else if (!s->cval) {
                if (s->graph_input >= 0) {
                    err(im,
                        "onnx: %s: input %zu ('%s') must be constant, but graph input '%s' "
                        "is not",
                        desc, k, an, in);
                    if (!record_need_const(im, s)) {
                        return DL_ERR_NOMEM;
                    }
                } else {
                    err(im,
                        "onnx: %s: input %zu ('%s') must be constant, but '%s' is computed "
                        "by node %d",
                        desc, k, an, in, s->def_node);
                }
            } else if (s->cval->dtype != DL_DT_INT64 && s->cval->dtype != DL_DT_INT32) {
                err(im, "onnx: %s: input %zu ('%s') must hold integers, not %s", desc, k, an,
                    dl_dtype_name(s->cval->dtype));
            } else if (s->cval->rank > 1) {
                err(im, "onnx: %s: input %zu ('%s') must be 1-D, not rank %d", desc, k, an,
                    (int)s->cval->rank);
            }
        }
        for (size_t k = 0; k < nd->n_output; k++) {
            const char *on = nd->output[k] ? nd->output[k] : "";
            if (on[0] == '\0') {
                continue;
            }
            sym *s = sym_get(im, on);
            if (!s) {
                return DL_ERR_NOMEM;
            }
            if (s->defined) {
                err(im, "onnx: %s: output '%s' is already defined", desc, on);
                continue;
            }
            s->defined = true;
            s->def_node = (int32_t)i;
            s->fold = fold && k == 0;
            s->kdt = kdt;
            if (alias_src) {
                s->alias_of = alias_src;
                s->alias_node = (int32_t)i;
                s->cval = alias_src->cval;
            }
            if (is_const && k == 0) {
                dl_tensor *t;
                dl_status st = constant_value(im, nd, desc, &t);
                if (st == DL_ERR_NOMEM) {
                    return st;
                }
                if (st == DL_OK) {
                    s->cval = s->owned = t;
                }
            }
        }
    }
    for (size_t i = 0; i < g->n_output; i++) {
        const char *nm = g->output[i]->name ? g->output[i]->name : "";
        sym *s = sym_find(im, nm);
        if (!s || !s->defined) {
            err(im, "onnx: graph output '%s' is never defined", nm);
            continue;
        }
        s->used = true;
        s->n_uses++;
    }
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------
// Emit pass

// A symbolic ONNX dimension (dim_param, e.g. from PyTorch's dynamic_axes) becomes a named dim
// of the module, shared by every input naming it. Its default is 1 (a note says so): bind the
// real size where the model is used (-D NAME=V, dlcc train --batch for the batch dim).
static dl_status symbolic_dim(imp *im, const char *input, size_t i, const char *param,
                              dl_ir_dim *out) {
    char *name = sanitize(param);
    if (!name) {
        return DL_ERR_NOMEM;
    }
    int32_t di = dl_ir_module_find_dim(im->m, name);
    dl_status st = DL_OK;
    if (di < 0) {
        st = dl_ir_module_add_dim(im->m, name, im->sym_default, DL_NO_LOC, &di);
        if (st == DL_OK && im->sym_default == 1) {
            dl_diag(im->d, DL_SEV_NOTE, DL_NO_LOC,
                    "onnx: graph input '%s': dimension %zu is symbolic ('%s'): it becomes `dim "
                    "%s = 1`; bind it with -D %s=SIZE",
                    input, i, param, name, name);
        }
    }
    free(name);
    if (st == DL_OK) {
        out->value = im->m->dims.data[di].value;
        out->sym = di;
    }
    return st;
}

static dl_status type_from_value_info(imp *im, const Onnx__ValueInfoProto *vi, dl_ir_type *t) {
    const char *nm = vi->name ? vi->name : "";
    const Onnx__TypeProto__Tensor *tt = vi->type->tensor_type; // checked by check_model
    memset(t, 0, sizeof(*t));
    (void)dl_fe__dtype_from_onnx(tt->elem_type, &t->dtype);
    if (!tt->shape) {
        err(im, "onnx: graph input '%s' has no shape (a static shape is required)", nm);
        return DL_ERR_UNSUPPORTED;
    }
    if (tt->shape->n_dim > DL_MAX_RANK) {
        err(im, "onnx: graph input '%s' has rank %zu (at most %d supported)", nm, tt->shape->n_dim,
            DL_MAX_RANK);
        return DL_ERR_UNSUPPORTED;
    }
    t->rank = (int32_t)tt->shape->n_dim;
    for (size_t i = 0; i < tt->shape->n_dim; i++) {
        const Onnx__TensorShapeProto__Dimension *dm = tt->shape->dim[i];
        if (dm->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
            dm->dim_param && dm->dim_param[0]) {
            DL_TRY(symbolic_dim(im, nm, i, dm->dim_param, &t->dims[i]));
            continue;
        }
        if (dm->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE ||
            dm->dim_value < 0) {
            err(im,
                "onnx: graph input '%s': dimension %zu has neither a size nor a name (an ONNX "
                "dim_param names a dimension, e.g. PyTorch's dynamic_axes)",
                nm, i);
            return DL_ERR_UNSUPPORTED;
        }
        t->dims[i].value = dm->dim_value;
        t->dims[i].sym = -1;
    }
    return DL_OK;
}

static void type_of_tensor(const dl_tensor *c, dl_ir_type *t) {
    memset(t, 0, sizeof(*t));
    t->dtype = c->dtype;
    t->rank = c->rank;
    for (int32_t i = 0; i < c->rank; i++) {
        t->dims[i].value = c->dims[i];
        t->dims[i].sym = -1;
    }
}

static dl_ir_literal *literal_of(dl_ir_module *m, const dl_tensor *c) {
    int64_t n = dl_tensor_numel(c);
    dl_ir_literal *lit = dl_ir_module_new_literal(m, c->dtype, n);
    if (!lit) {
        return NULL;
    }
    for (int64_t i = 0; i < n; i++) {
        if (lit->f) {
            lit->f[i] = dl_tensor_get(c, i);
        } else if (c->dtype == DL_DT_INT64) {
            lit->i[i] = ((const int64_t *)c->data)[i]; // exact beyond 2^53
        } else {
            lit->i[i] = (int64_t)dl_tensor_get(c, i);
        }
    }
    return lit;
}

// Emits a constant-valued sym as a param (initializers, unless as_consts) or a const.
// Emits constant value `c` as a param or a const named after `src` (made unique); *out gets it.
static dl_status emit_value(imp *im, const dl_tensor *c, const char *src, bool as_param,
                            dl_ir_value **out) {
    char *id = make_ident(im, src);
    if (!id) {
        return DL_ERR_NOMEM;
    }
    dl_ir_type t;
    type_of_tensor(c, &t);
    dl_status st = DL_ERR_NOMEM;
    dl_ir_literal *lit = literal_of(im->m, c);
    if (lit && as_param) {
        dl_ir_init *init = dl_ir_module_new_init(im->m, DL_IR_INIT_LITERAL);
        if (init) {
            init->lit = lit;
            st = dl_ir_module_add_param(im->m, id, &t, init, DL_NO_LOC, out);
        }
    } else if (lit) {
        st = dl_ir_module_add_const(im->m, id, &t, lit, DL_NO_LOC, out);
    }
    free(id);
    return st;
}

// Emits a constant-valued sym as a param (initializers, unless as_consts) or a const.
static dl_status emit_constant(imp *im, sym *s, bool as_param) {
    return emit_value(im, s->cval, s->onnx, as_param, &s->v);
}

// Emits alias `s` (an Identity of a param) as a param of its own, with a note.
static dl_status emit_alias_param(imp *im, sym *s) {
    DL_TRY(emit_constant(im, s, true));
    const Onnx__NodeProto *nd = im->g->node[s->alias_node];
    char desc[300];
    node_desc(nd, (size_t)s->alias_node, desc, sizeof desc);
    dl_diag(im->d, DL_SEV_NOTE, DL_NO_LOC,
            "onnx: %s makes '%s' an alias of initializer '%s' (exporters merge initializers "
            "with equal values): imported as param '%s', an independent copy",
            desc, s->onnx, alias_root(s)->onnx, s->v->name);
    return DL_OK;
}

// Whether this running-statistic use of param-like `s` gets a copy of its own (see "Aliased
// initializers"). Called once per such use, in node order.
static bool stat_use_needs_copy(sym *s) {
    if (s->n_uses <= 1) {
        return false;
    }
    if (s->n_uses > s->n_stat_uses) {
        return true; // also a weight (or an output): every statistic gets its own
    }
    return ++s->stat_seen > 1; // only statistics: the first keeps the original
}

// Emits a copy of param-like `s` for running-statistic operand `slot` of node `idx`.
static dl_status emit_stat_copy(imp *im, sym *s, size_t idx, size_t slot, dl_ir_value **out) {
    const Onnx__NodeProto *nd = im->g->node[idx];
    const char *stat = slot == 3 ? "running_mean" : "running_var";
    const char *base = nd->name && nd->name[0]                             ? nd->name
                       : nd->n_output && nd->output[0] && nd->output[0][0] ? nd->output[0]
                                                                           : s->onnx;
    size_t n = strlen(base) + strlen(stat) + 2;
    char *src = dl_mem_alloc(n);
    if (!src) {
        return DL_ERR_NOMEM;
    }
    snprintf(src, n, "%s.%s", base, stat);
    dl_status st = emit_value(im, s->cval, src, true, out);
    free(src);
    DL_TRY(st);
    char desc[300];
    node_desc(nd, idx, desc, sizeof desc);
    dl_diag(im->d, DL_SEV_NOTE, DL_NO_LOC,
            "onnx: %s: %s operand '%s' is also used elsewhere: imported as param '%s', an "
            "independent copy (running statistics are updated in training)",
            desc, stat, s->onnx, (*out)->name);
    return DL_OK;
}

// Converts one ONNX attribute; returns false (with a diagnostic) when unsupported.
static bool convert_attr(imp *im, dl_arena *a, dl_ir_op op, const Onnx__AttributeProto *ap,
                         const char *desc, dl_ir_attr *out) {
    const char *an = ap->name ? ap->name : "";
    memset(out, 0, sizeof(*out));
    out->name = an;
    out->i_sym = -1;
    const dl_ir_attr_spec *spec = dl_ir_op_find_attr_spec(op, an);
    if (!spec) {
        err(im, "onnx: %s: attribute '%s' is not supported", desc, an);
        return false;
    }
    if (ap->ref_attr_name && ap->ref_attr_name[0]) {
        err(im, "onnx: %s: attribute '%s' refers to a function attribute", desc, an);
        return false;
    }
    if (op == DL_IR_OP_CAST && strcmp(an, "to") == 0) {
        dl_dtype dt;
        if (ap->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT ||
            !dl_fe__dtype_from_onnx((int32_t)ap->i, &dt)) {
            err(im, "onnx: %s: cast to %s is not supported", desc, onnx_dtype_name((int32_t)ap->i));
            return false;
        }
        out->kind = DL_IR_ATTR_STRING;
        out->s = dl_dtype_name(dt);
        return true;
    }
    dl_ir_attr_kind got;
    switch ((int)ap->type) { // int: protobuf-c adds a size-forcing enumerator
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
        got = DL_IR_ATTR_INT;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
        got = DL_IR_ATTR_FLOAT;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
        got = DL_IR_ATTR_STRING;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
        got = DL_IR_ATTR_INTS;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
        got = DL_IR_ATTR_FLOATS;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
        got = DL_IR_ATTR_STRINGS;
        break;
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__UNDEFINED:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSOR:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTO:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSORS:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__SPARSE_TENSORS:
    case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TYPE_PROTOS:
    default:
        err(im, "onnx: %s: attribute '%s' has an unsupported kind (%d)", desc, an, (int)ap->type);
        return false;
    }
    if (got != spec->kind) {
        err(im, "onnx: %s: attribute '%s' is a %s, expected a %s", desc, an,
            dl_ir_attr_kind_name(got), dl_ir_attr_kind_name(spec->kind));
        return false;
    }
    out->kind = got;
    switch (got) {
    case DL_IR_ATTR_INT:
        out->i = ap->i;
        break;
    case DL_IR_ATTR_FLOAT:
        out->f = tidy_float(ap->f);
        break;
    case DL_IR_ATTR_STRING:
        out->s = dl_arena_strndup(a, (const char *)ap->s.data, ap->s.len);
        if (!out->s) {
            return false;
        }
        if (strlen(out->s) != ap->s.len) {
            err(im, "onnx: %s: attribute '%s' holds a string with a NUL byte", desc, an);
            return false;
        }
        break;
    case DL_IR_ATTR_INTS:
        out->n = ap->n_ints;
        out->ints = ap->ints;
        break;
    case DL_IR_ATTR_FLOATS:
        out->n = ap->n_floats;
        out->floats = DL_ARENA_NEWN(a, double, ap->n_floats ? ap->n_floats : 1);
        if (!out->floats) {
            return false;
        }
        for (size_t k = 0; k < ap->n_floats; k++) {
            out->floats[k] = tidy_float(ap->floats[k]);
        }
        break;
    case DL_IR_ATTR_STRINGS:
        out->n = ap->n_strings;
        out->strs = DL_ARENA_NEWN(a, const char *, ap->n_strings ? ap->n_strings : 1);
        if (!out->strs) {
            return false;
        }
        for (size_t k = 0; k < ap->n_strings; k++) {
            out->strs[k] =
                dl_arena_strndup(a, (const char *)ap->strings[k].data, ap->strings[k].len);
            if (!out->strs[k]) {
                return false;
            }
        }
        break;
    }
    return true;
}

// Types of `node`'s outputs from the caller's shape hook, so that a later `Shape` can fold. A
// failure leaves them unknown; its diagnostics are dropped (dlcc check reports them in order).
static void infer_node(imp *im, const dl_ir_node *node) {
    if (im->shape_fn && im->shape_d) {
        (void)im->shape_fn(im->m, node, im->shape_d);
    }
}

// The name of the named dim element `k` of folded value `s` depends on, or NULL when literal.
static const char *dep_dim(const imp *im, const sym *s, int64_t k) {
    if (!s->se || s->se[k].dim == DL_FE_SYM_LIT) {
        return NULL;
    }
    int64_t d = s->se[k].dim >= 0 ? s->se[k].dim : s->se[k].coef;
    return d >= 0 && (size_t)d < im->m->dims.len ? im->m->dims.data[d].name : "a named dim";
}

// Emits folded value `s` as a const where a node reads it as a tensor; refused when it depends
// on a named dim (a const would keep the value it has at the dim's default).
static dl_status emit_folded_constant(imp *im, sym *s, const char *desc) {
    int64_t n = dl_tensor_numel(s->cval);
    for (int64_t k = 0; s->se && k < n; k++) {
        const char *dn = dep_dim(im, s, k);
        if (dn) {
            err(im,
                "onnx: %s: '%s' is computed from the size of %s and used as a tensor, not as a "
                "shape; it cannot be folded (export with a static size for that dim)",
                desc, s->onnx, dn);
            return DL_ERR_UNSUPPORTED;
        }
    }
    return emit_constant(im, s, false);
}

// Attribute `an` of node `op` from folded or constant value `s` (1-D integers): an element equal
// to a named dim is written as the dim's name; in a Reshape target, one element that is
// otherwise computed from named dims becomes -1 (inferred), which is exact whatever the dims.
static dl_status slot_attr(imp *im, dl_arena *a, dl_ir_op op, const sym *s, const char *an,
                           const char *desc, dl_ir_attr *at) {
    int64_t n = dl_tensor_numel(s->cval);
    memset(at, 0, sizeof(*at));
    at->name = an;
    at->kind = DL_IR_ATTR_INTS;
    at->i_sym = -1;
    at->n = (size_t)n;
    at->ints = DL_ARENA_NEWN(a, int64_t, n ? n : 1);
    if (!at->ints) {
        return DL_ERR_NOMEM;
    }
    bool is_int = const_ints(s->cval, at->ints);
    DL_ASSERT(is_int); // the caller checked the dtype
    if (!s->se) {
        return DL_OK;
    }
    at->int_syms = DL_ARENA_NEWN(a, int32_t, n ? n : 1);
    if (!at->int_syms) {
        return DL_ERR_NOMEM;
    }
    bool have_infer = false;
    for (int64_t k = 0; k < n; k++) {
        have_infer =
            have_infer || (op == DL_IR_OP_RESHAPE && at->ints[k] == -1 && !dep_dim(im, s, k));
    }
    for (int64_t k = 0; k < n; k++) {
        dl_fe_symel e = s->se[k];
        at->int_syms[k] = -1;
        if (e.dim == DL_FE_SYM_LIT) {
            continue;
        }
        if (e.dim >= 0 && e.coef == 1) {
            at->int_syms[k] = e.dim;
            continue;
        }
        if (op == DL_IR_OP_RESHAPE && !have_infer) {
            at->ints[k] = -1;
            have_infer = true;
            continue;
        }
        err(im,
            "onnx: %s: element %lld of '%s' ('%s') is computed from the size of %s in a way the "
            "graph format cannot express%s; export with a static size for that dim",
            desc, (long long)k, an, s->onnx, dep_dim(im, s, k),
            op == DL_IR_OP_RESHAPE ? " (a Reshape target may infer only one such element)" : "");
        return DL_ERR_UNSUPPORTED;
    }
    return DL_OK;
}

// Emits ConstantOfShape of a non-integer value as Expand of a scalar const to the shape, which
// may name dims.
static dl_status emit_const_of_shape(imp *im, dl_arena *a, size_t idx, const char *desc) {
    const Onnx__NodeProto *nd = im->g->node[idx];
    sym *shp = nd->n_input ? sym_find(im, nd->input[0] ? nd->input[0] : "") : NULL;
    sym *o = sym_find(im, nd->output[0]);
    DL_ASSERT(o);
    if (!shp || !shp->cval || shp->cval->rank != 1 || !int_dtype(shp->cval->dtype) ||
        shp->cval->dtype == DL_DT_BOOL) {
        err(im, "onnx: %s: the shape is not a known 1-D integer tensor", desc);
        return DL_ERR_UNSUPPORTED;
    }
    dl_tensor val = {0};
    dl_status st = DL_OK;
    const Onnx__AttributeProto *va = NULL;
    for (size_t k = 0; k < nd->n_attribute; k++) {
        if (nd->attribute[k]->name && !strcmp(nd->attribute[k]->name, "value")) {
            va = nd->attribute[k];
        }
    }
    if (va && va->t) {
        st = tensor_from_proto(va->t, "ConstantOfShape value", false, &val, im->d);
        if (st == DL_OK && dl_tensor_numel(&val) != 1) {
            err(im, "onnx: %s: value must hold one element", desc);
            st = DL_ERR_UNSUPPORTED;
        }
        val.rank = 0;
    } else {
        st = dl_tensor_alloc(&val, DL_DT_FLOAT, 0, NULL);
    }
    dl_ir_value *cv = NULL;
    size_t nlen = strlen(o->onnx) + 8;
    char *cname = dl_mem_alloc(nlen);
    if (st == DL_OK && !cname) {
        st = DL_ERR_NOMEM;
    }
    if (st == DL_OK) {
        snprintf(cname, nlen, "%s_value", o->onnx);
        st = emit_value(im, &val, cname, false, &cv);
    }
    free(cname);
    dl_tensor_free(&val);
    DL_TRY(st);
    dl_ir_attr at;
    DL_TRY(slot_attr(im, a, DL_IR_OP_EXPAND, shp, "shape", desc, &at));
    char *id = make_ident(im, o->onnx);
    if (!id) {
        return DL_ERR_NOMEM;
    }
    const char *names[1] = {id};
    dl_ir_node *node;
    st = dl_ir_module_add_node(im->m, DL_IR_OP_EXPAND, &cv, 1, names, NULL, 1, &at, 1, DL_NO_LOC,
                               &node);
    free(id);
    DL_TRY(st);
    o->v = node->outputs[0];
    infer_node(im, node);
    return DL_OK;
}

// Shape or Size of input 0, from its constant value or its inferred type.
static dl_status fold_shape(imp *im, const Onnx__NodeProto *nd, const char *desc, bool is_size,
                            dl_tensor *out, dl_fe_symel **out_se) {
    sym *x = nd->n_input ? sym_find(im, nd->input[0] ? nd->input[0] : "") : NULL;
    dl_ir_type t;
    if (x && x->cval) {
        type_of_tensor(x->cval, &t);
    } else if (x && x->v && x->v->type.rank >= 0) {
        t = x->v->type;
    } else {
        err(im, "onnx: %s: the shape of '%s' is not known at import (%s)", desc, x ? x->onnx : "",
            im->shape_fn ? "its shape inference failed"
                         : "no shape inference was given to the importer");
        return DL_ERR_UNSUPPORTED;
    }
    int64_t lo = 0, hi = t.rank;
    if (!is_size) {
        lo = dl_fe__onnx_int_attr(nd, "start", 0);
        hi = dl_fe__onnx_int_attr(nd, "end", t.rank);
        lo = lo < 0 ? lo + t.rank : lo;
        hi = hi < 0 ? hi + t.rank : hi;
        lo = lo < 0 ? 0 : lo > t.rank ? t.rank : lo;
        hi = hi < lo ? lo : hi > t.rank ? t.rank : hi;
    }
    int64_t n = hi - lo;
    DL_TRY(dl_tensor_alloc(out, DL_DT_INT64, is_size ? 0 : 1, &n));
    int64_t *v = out->data;
    bool any_sym = false;
    for (int32_t k = 0; k < t.rank; k++) {
        any_sym = any_sym || t.dims[k].sym >= 0;
    }
    *out_se = NULL;
    if (any_sym) {
        *out_se = dl_mem_calloc((size_t)(n ? n : 1), sizeof **out_se);
        if (!*out_se) {
            dl_tensor_free(out);
            return DL_ERR_NOMEM;
        }
    }
    if (is_size) {
        int64_t prod = 1, n_sym = 0, coef = 1;
        int32_t dim = -1;
        for (int32_t k = 0; k < t.rank; k++) {
            prod *= t.dims[k].value;
            if (t.dims[k].sym >= 0) {
                n_sym++;
                dim = t.dims[k].sym;
            } else {
                coef *= t.dims[k].value;
            }
        }
        v[0] = prod;
        if (any_sym) {
            (*out_se)[0] =
                n_sym == 1 ? (dl_fe_symel){dim, coef} : (dl_fe_symel){DL_FE_SYM_OPAQUE, 0};
        }
        return DL_OK;
    }
    for (int64_t k = 0; k < n; k++) {
        v[k] = t.dims[lo + k].value;
        if (any_sym) {
            int32_t sy = t.dims[lo + k].sym;
            (*out_se)[k] = sy >= 0 ? (dl_fe_symel){sy, 1} : (dl_fe_symel){DL_FE_SYM_LIT, 0};
        }
    }
    return DL_OK;
}

// Evaluates folded node `idx` (or emits an import-only op that does not fold).
static dl_status emit_folded(imp *im, dl_arena *a, size_t idx) {
    const Onnx__NodeProto *nd = im->g->node[idx];
    char desc[300];
    node_desc(nd, idx, desc, sizeof desc);
    const char *opn = nd->op_type ? nd->op_type : "";
    sym *o = nd->n_output && nd->output[0] && nd->output[0][0] ? sym_find(im, nd->output[0]) : NULL;
    if (!o) {
        return DL_OK; // nothing reads it
    }
    if (!o->fold && !strcmp(opn, "ConstantOfShape")) {
        return emit_const_of_shape(im, a, idx, desc);
    }
    if (!o->fold) {
        err(im, "onnx: %s: %s is supported only on integer values known at import", desc, opn);
        return DL_ERR_UNSUPPORTED;
    }
    dl_tensor *t = dl_mem_calloc(1, sizeof *t);
    if (!t) {
        return DL_ERR_NOMEM;
    }
    dl_fe_symel *se = NULL;
    dl_status st;
    if (!strcmp(opn, "Shape") || !strcmp(opn, "Size")) {
        st = fold_shape(im, nd, desc, opn[1] == 'i', t, &se);
    } else {
        dl_fe_cv ins[8];
        size_t n_in = nd->n_input;
        st = n_in <= DL_ARRAY_LEN(ins) ? DL_OK : DL_ERR_UNSUPPORTED;
        for (size_t k = 0; k < n_in && st == DL_OK; k++) {
            const char *in = nd->input[k] ? nd->input[k] : "";
            const sym *s = in[0] ? sym_find(im, in) : NULL;
            ins[k] = (dl_fe_cv){s ? s->cval : NULL, s ? s->se : NULL};
            if (s && !s->cval) {
                err(im,
                    "onnx: %s: input %zu '%s' has no value (its shape computation was not "
                    "folded)",
                    desc, k, in);
                st = DL_ERR_UNSUPPORTED;
            }
        }
        char why[256] = "too many inputs";
        dl_tensor cos_val = {0};
        if (st == DL_OK && !strcmp(opn, "ConstantOfShape")) {
            // The value attribute (float 0 when absent) becomes input 1 for the folder.
            const Onnx__AttributeProto *va = NULL;
            for (size_t k = 0; k < nd->n_attribute; k++) {
                if (nd->attribute[k]->name && !strcmp(nd->attribute[k]->name, "value")) {
                    va = nd->attribute[k];
                }
            }
            st = va && va->t
                     ? tensor_from_proto(va->t, "ConstantOfShape value", false, &cos_val, im->d)
                     : dl_tensor_alloc(&cos_val, DL_DT_FLOAT, 0, NULL);
            ins[1] = (dl_fe_cv){&cos_val, NULL};
            n_in = 2;
            if (st == DL_ERR_UNSUPPORTED || st == DL_ERR_PARSE) {
                im->n_errors++;
            }
        }
        if (st == DL_OK) {
            st = dl_fe__onnx_fold(nd, opn, im->opset, ins, n_in, t, &se, why, sizeof why);
        }
        dl_tensor_free(&cos_val);
        if (st == DL_ERR_UNSUPPORTED && n_in <= DL_ARRAY_LEN(ins) && !im->n_errors) {
            err(im, "onnx: %s: cannot fold this shape computation: %s", desc, why);
        }
    }
    if (st != DL_OK) {
        free(t);
        return st;
    }
    o->cval = o->owned = t;
    o->se = se;
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------
// Decomposed ops
//
// ONNX ops that the graph format does not have but that equal a few of its ops exactly are
// written as those ops at import, so the reference evaluator, the backends and autodiff need
// nothing new: PRelu (Where(x < 0, x * slope, x)), InstanceNormalization (LayerNormalization
// over the spatial axes, then the per-channel scale and bias), Resize (nearest: Gather of the
// source indices; linear and cubic: the two or four neighbours' Gathers weighted, axis by axis),
// LSTM (forward, unrolled over its static sequence length), a 1-D Conv or ConvTranspose (a 2-D
// one over [N, C, 1, L]), a 3-D Conv (one 2-D Conv over the depth windows, emit_conv3d) and a
// 3-D ConvTranspose (one 2-D ConvTranspose with the depth taps as channels, then the depth
// overlap as a MatMul, emit_convt3d).
// Intermediate values are named after the node's first output with a suffix.

static const char *const decomposed_ops[] = {"PRelu", "InstanceNormalization", "Resize", "LSTM"};

static bool decomposed_op(const char *opn) {
    for (size_t i = 0; i < DL_ARRAY_LEN(decomposed_ops); i++) {
        if (!strcmp(decomposed_ops[i], opn)) {
            return true;
        }
    }
    return false;
}

// Operand slots of a decomposed op that must be known at import rather than read as tensors
// (Resize's roi, scales and sizes).
static bool decomposed_known_slot(const char *opn, size_t k) {
    return !strcmp(opn, "Resize") && k >= 1;
}

static dl_ir_attr attr_ints(const char *name, int64_t *v, size_t n) {
    return (dl_ir_attr){.name = name, .kind = DL_IR_ATTR_INTS, .i_sym = -1, .n = n, .ints = v};
}

static dl_ir_attr attr_int(const char *name, int64_t v) {
    return (dl_ir_attr){.name = name, .kind = DL_IR_ATTR_INT, .i_sym = -1, .i = v};
}

// Adds `op` (one output) named `base` + `suffix` (made unique); *out gets the output, typed by
// the shape hook when there is one.
static dl_status add_op(imp *im, dl_ir_op op, dl_ir_value *const *ins, size_t n_ins,
                        const dl_ir_attr *attrs, size_t n_attrs, const char *base,
                        const char *suffix, dl_ir_value **out) {
    size_t n = strlen(base) + strlen(suffix) + 1;
    char *src = dl_mem_alloc(n);
    if (!src) {
        return DL_ERR_NOMEM;
    }
    snprintf(src, n, "%s%s", base, suffix);
    char *id = make_ident(im, src);
    free(src);
    if (!id) {
        return DL_ERR_NOMEM;
    }
    const char *names[1] = {id};
    dl_ir_node *node;
    dl_status st = dl_ir_module_add_node(im->m, op, ins, n_ins, names, NULL, 1, attrs, n_attrs,
                                         DL_NO_LOC, &node);
    free(id);
    DL_TRY(st);
    *out = node->outputs[0];
    infer_node(im, node);
    return DL_OK;
}

// A const of `dtype` and shape dims[0..rank) holding `vals` (n values, or one value splat).
static dl_status add_const(imp *im, dl_dtype dtype, int32_t rank, const int64_t *dims,
                           const double *vals, int64_t n, const char *base, const char *suffix,
                           dl_ir_value **out) {
    dl_tensor t;
    DL_TRY(dl_tensor_alloc(&t, dtype, rank, dims));
    int64_t numel = dl_tensor_numel(&t);
    for (int64_t i = 0; i < numel; i++) {
        dl_tensor_set(&t, i, vals[n == 1 ? 0 : i]);
    }
    size_t len = strlen(base) + strlen(suffix) + 1;
    char *src = dl_mem_alloc(len);
    dl_status st = DL_ERR_NOMEM;
    if (src) {
        snprintf(src, len, "%s%s", base, suffix);
        st = emit_value(im, &t, src, false, out);
        free(src);
    }
    dl_tensor_free(&t);
    return st;
}

// The value of ONNX operand `k` of node `nd` (NULL when omitted), emitting a constant on its
// first use as a tensor.
static dl_status operand(imp *im, const Onnx__NodeProto *nd, size_t k, const char *desc,
                         dl_ir_value **out) {
    *out = NULL;
    const char *in = k < nd->n_input && nd->input[k] ? nd->input[k] : "";
    if (!in[0]) {
        return DL_OK;
    }
    sym *s = sym_find(im, in);
    if (s && !s->v && s->cval) {
        DL_TRY(emit_folded_constant(im, s, desc));
    }
    if (!s || !s->v) {
        err(im, "onnx: %s: input %zu '%s' has no value", desc, k, in);
        return DL_ERR_UNSUPPORTED;
    }
    *out = s->v;
    return DL_OK;
}

// The type of `v`, or an error when the shape hook could not infer it.
static dl_status known_type(imp *im, const dl_ir_value *v, const char *desc, const char *what) {
    if (v->type.rank < 0) {
        err(im, "onnx: %s: the shape of %s '%s' is not known at import (%s)", desc, what, v->name,
            im->shape_fn ? "its shape inference failed" : "no shape inference was given");
        return DL_ERR_UNSUPPORTED;
    }
    return DL_OK;
}

static const Onnx__AttributeProto *onnx_attr(const Onnx__NodeProto *nd, const char *name) {
    for (size_t k = 0; k < nd->n_attribute; k++) {
        if (nd->attribute[k]->name && !strcmp(nd->attribute[k]->name, name)) {
            return nd->attribute[k];
        }
    }
    return NULL;
}

static bool onnx_attr_str_is(const Onnx__NodeProto *nd, const char *name, const char *def,
                             const char *want) {
    const Onnx__AttributeProto *a = onnx_attr(nd, name);
    if (!a) {
        return !strcmp(def, want);
    }
    return a->s.len == strlen(want) && !memcmp(a->s.data, want, a->s.len);
}

// Refuses attributes a decomposition does not implement: each name in `allowed` is fine.
static bool only_attrs(imp *im, const Onnx__NodeProto *nd, const char *desc,
                       const char *const *allowed, size_t n_allowed) {
    for (size_t k = 0; k < nd->n_attribute; k++) {
        const char *an = nd->attribute[k]->name ? nd->attribute[k]->name : "";
        bool ok = false;
        for (size_t j = 0; j < n_allowed && !ok; j++) {
            ok = !strcmp(an, allowed[j]);
        }
        if (!ok) {
            err(im, "onnx: %s: attribute '%s' is not supported", desc, an);
            return false;
        }
    }
    return true;
}

// PRelu(x, slope) = Where(x < 0, x * slope, x): PyTorch's x if x >= 0 else slope * x.
static dl_status emit_prelu(imp *im, const Onnx__NodeProto *nd, const char *desc,
                            const char *out_name, dl_ir_value **out) {
    dl_ir_value *x, *slope, *zero, *neg, *xs;
    DL_TRY(operand(im, nd, 0, desc, &x));
    DL_TRY(operand(im, nd, 1, desc, &slope));
    if (!x || !slope || !only_attrs(im, nd, desc, NULL, 0)) {
        err(im, "onnx: %s: PRelu takes X and slope and no attributes", desc);
        return DL_ERR_UNSUPPORTED;
    }
    DL_TRY(known_type(im, x, desc, "X"));
    double z = 0;
    DL_TRY(add_const(im, x->type.dtype, 0, NULL, &z, 1, out_name, "_zero", &zero));
    dl_ir_value *lz[2] = {x, zero}, *mx[2] = {x, slope};
    DL_TRY(add_op(im, DL_IR_OP_LESS, lz, 2, NULL, 0, out_name, "_neg", &neg));
    DL_TRY(add_op(im, DL_IR_OP_MUL, mx, 2, NULL, 0, out_name, "_scaled", &xs));
    dl_ir_value *w[3] = {neg, xs, x};
    return add_op(im, DL_IR_OP_WHERE, w, 3, NULL, 0, out_name, "", out);
}

// InstanceNormalization(x [N, C, D...], scale [C], B [C]) = LayerNormalization over D... with
// unit scale, times scale and plus B broadcast over D....
static dl_status emit_instance_norm(imp *im, const Onnx__NodeProto *nd, const char *desc,
                                    const char *out_name, dl_ir_value **out) {
    static const char *const allowed[] = {"epsilon"};
    dl_ir_value *x, *scale, *bias, *one, *ln, *sc, *bc, *mul;
    DL_TRY(operand(im, nd, 0, desc, &x));
    DL_TRY(operand(im, nd, 1, desc, &scale));
    DL_TRY(operand(im, nd, 2, desc, &bias));
    if (!x || !scale || !bias || !only_attrs(im, nd, desc, allowed, 1)) {
        err(im, "onnx: %s: InstanceNormalization takes X, scale and B", desc);
        return DL_ERR_UNSUPPORTED;
    }
    DL_TRY(known_type(im, x, desc, "X"));
    int32_t r = x->type.rank;
    if (r < 3) {
        err(im, "onnx: %s: X must have rank >= 3 (N, C, D...), got rank %d", desc, (int)r);
        return DL_ERR_UNSUPPORTED;
    }
    const Onnx__AttributeProto *ea = onnx_attr(nd, "epsilon");
    double eps = ea ? tidy_float(ea->f) : 1e-5;
    // A unit scale of exactly the normalised shape (LayerNormalization's gradient wants it),
    // as a splat: one number, whatever the size; dims keep their names.
    dl_ir_type ot = {.dtype = x->type.dtype, .rank = r - 2};
    memcpy(ot.dims, x->type.dims + 2, sizeof(dl_ir_dim) * (size_t)(r - 2));
    dl_ir_literal *lit = dl_ir_module_new_literal(im->m, x->type.dtype, 1);
    size_t nlen = strlen(out_name) + 5;
    char *src = dl_mem_alloc(nlen);
    char *id = NULL;
    if (src) {
        snprintf(src, nlen, "%s_one", out_name);
        id = make_ident(im, src);
        free(src);
    }
    if (!lit || !id) {
        free(id);
        return DL_ERR_NOMEM;
    }
    lit->is_splat = true;
    if (lit->f) {
        lit->f[0] = 1;
    } else {
        lit->i[0] = 1;
    }
    dl_status st = dl_ir_module_add_const(im->m, id, &ot, lit, DL_NO_LOC, &one);
    free(id);
    DL_TRY(st);
    dl_ir_attr la[2] = {attr_int("axis", 2),
                        {.name = "epsilon", .kind = DL_IR_ATTR_FLOAT, .i_sym = -1, .f = eps}};
    dl_ir_value *li[2] = {x, one};
    DL_TRY(add_op(im, DL_IR_OP_LAYER_NORMALIZATION, li, 2, la, 2, out_name, "_normed", &ln));
    int64_t axes[DL_MAX_RANK];
    for (int32_t k = 0; k < r - 2; k++) {
        axes[k] = k + 1;
    }
    dl_ir_attr ua = attr_ints("axes", axes, (size_t)(r - 2));
    DL_TRY(add_op(im, DL_IR_OP_UNSQUEEZE, &scale, 1, &ua, 1, out_name, "_scale", &sc));
    DL_TRY(add_op(im, DL_IR_OP_UNSQUEEZE, &bias, 1, &ua, 1, out_name, "_bias", &bc));
    dl_ir_value *mi[2] = {ln, sc};
    DL_TRY(add_op(im, DL_IR_OP_MUL, mi, 2, NULL, 0, out_name, "_scaled", &mul));
    dl_ir_value *ai[2] = {mul, bc};
    return add_op(im, DL_IR_OP_ADD, ai, 2, NULL, 0, out_name, "", out);
}

// The index of string attribute `name` of `nd` in choices[0..n) (its default `def` when absent),
// or -1 with an error naming the node, the attribute, its value and the choices.
static int attr_choice(imp *im, const Onnx__NodeProto *nd, const char *desc, const char *name,
                       const char *def, const char *const *choices, int n) {
    for (int k = 0; k < n; k++) {
        if (onnx_attr_str_is(nd, name, def, choices[k])) {
            return k;
        }
    }
    const Onnx__AttributeProto *a = onnx_attr(nd, name);
    char list[200] = "";
    for (int k = 0; k < n; k++) {
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s%s", k ? ", " : "", choices[k]);
    }
    bool shown = a && a->s.data && a->s.len < 64;
    err(im, "onnx: %s: attribute '%s' = '%.*s' is not supported (supported: %s)", desc, name,
        shown ? (int)a->s.len : 0, shown ? (const char *)a->s.data : "", list);
    return -1;
}

// The weights of Resize's cubic mode at distance r in (0, 1] from the left neighbour (ONNX's
// reference, Keys' cubic with a = cubic_coeff_a) for the taps at -1, 0, 1 and 2.
static void cubic_coeffs(double r, double a, double *c) {
    double r1 = r + 1, q = 1 - r, q1 = q + 1;
    c[0] = ((a * r1 - 5 * a) * r1 + 8 * a) * r1 - 4 * a;
    c[1] = ((a + 2) * r - (a + 3)) * r * r + 1;
    c[2] = ((a + 2) * q - (a + 3)) * q * q + 1;
    c[3] = ((a * q1 - 5 * a) * q1 + 8 * a) * q1 - 4 * a;
}

#define RESIZE_MAX_TAPS 4

// Resize by Gathers along each resized axis, following ONNX's reference per output index o:
// its coordinate c in the input (coordinate_transformation_mode), then `taps` source indices
// with weights. nearest: one index (nearest_mode), no weight. linear: floor(c) and floor(c) + 1
// weighed 1 - (c - floor(c)) and c - floor(c). cubic: i - 1 .. i + 2 for i = ceil(c) - 1 (the
// left neighbour, so r = c - i is in (0, 1]) weighed by cubic_coeffs(r, cubic_coeff_a). An index
// outside the input reads the edge; with exclude_outside its weight is 0 and the others are
// divided by their sum. Weights are computed in double and rounded once to X's dtype. The axis's
// result is the sum over taps of Gather(cur, index) * weight; every op has a gradient.
static dl_status emit_resize(imp *im, const Onnx__NodeProto *nd, const char *desc,
                             const char *out_name, dl_ir_value **out) {
    static const char *const allowed[] = {"coordinate_transformation_mode",
                                          "cubic_coeff_a",
                                          "exclude_outside",
                                          "extrapolation_value",
                                          "mode",
                                          "nearest_mode",
                                          "antialias",
                                          "keep_aspect_ratio_policy"};
    dl_ir_value *x;
    DL_TRY(operand(im, nd, 0, desc, &x));
    if (!x || !only_attrs(im, nd, desc, allowed, DL_ARRAY_LEN(allowed))) {
        return DL_ERR_UNSUPPORTED;
    }
    DL_TRY(known_type(im, x, desc, "X"));
    static const char *const modes[] = {"nearest", "linear", "cubic"};
    static const char *const ctms[] = {"half_pixel", "asymmetric", "align_corners",
                                       "pytorch_half_pixel", "tf_half_pixel_for_nn"};
    static const char *const nms[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
    static const char *const karps[] = {"stretch"};
    int mode = attr_choice(im, nd, desc, "mode", "nearest", modes, 3);
    int ctm = mode < 0 ? -1
                       : attr_choice(im, nd, desc, "coordinate_transformation_mode", "half_pixel",
                                     ctms, 5);
    int nm = ctm < 0 ? -1 : attr_choice(im, nd, desc, "nearest_mode", "round_prefer_floor", nms, 4);
    if (nm < 0 || attr_choice(im, nd, desc, "keep_aspect_ratio_policy", "stretch", karps, 1) < 0) {
        return DL_ERR_UNSUPPORTED;
    }
    bool nearest = mode == 0, exclude = dl_fe__onnx_int_attr(nd, "exclude_outside", 0) != 0;
    int64_t antialias = dl_fe__onnx_int_attr(nd, "antialias", 0);
    if (antialias != 0) {
        err(im, "onnx: %s: attribute 'antialias' = %lld is not supported (only 0)", desc,
            (long long)antialias);
        return DL_ERR_UNSUPPORTED;
    }
    if (exclude && nearest) {
        err(im, "onnx: %s: attribute 'exclude_outside' is not supported in mode nearest", desc);
        return DL_ERR_UNSUPPORTED;
    }
    const Onnx__AttributeProto *ca = onnx_attr(nd, "cubic_coeff_a");
    double coeff_a = ca ? (double)ca->f : -0.75; // the float32 value, as ONNX's reference reads it
    int taps = nearest ? 1 : mode == 1 ? 2 : 4;
    int32_t r = x->type.rank;
    const sym *ss =
        nd->n_input > 2 && nd->input[2] && nd->input[2][0] ? sym_find(im, nd->input[2]) : NULL;
    const sym *zs =
        nd->n_input > 3 && nd->input[3] && nd->input[3][0] ? sym_find(im, nd->input[3]) : NULL;
    if (ss && ss->cval && dl_tensor_numel(ss->cval) == 0) {
        ss = NULL; // an empty scales input means "use sizes"
    }
    const sym *given = ss ? ss : zs;
    if (!given || !given->cval || given->se || dl_tensor_numel(given->cval) != r) {
        err(im, "onnx: %s: scales or sizes must be known at import and give all %d axes", desc,
            (int)r);
        return DL_ERR_UNSUPPORTED;
    }
    // Axis ax goes from len to olen with the given scale; the last one resized computes the
    // output under its own name.
    int64_t olens[DL_MAX_RANK];
    double scales[DL_MAX_RANK];
    int32_t last = -1;
    for (int32_t ax = 0; ax < r; ax++) {
        int64_t len = x->type.dims[ax].value;
        double ol;
        if (ss) {
            scales[ax] = dl_tensor_get(ss->cval, ax);
            ol = floor((double)len * scales[ax]);
        } else {
            ol = dl_tensor_get(zs->cval, ax);
            scales[ax] = ol / (double)len;
        }
        // Not a size (NaN, negative, absurd): no int64 conversion of it. An axis left as it is
        // may be empty.
        bool same = ol == (double)len && scales[ax] == 1.0;
        if (!same &&
            (len < 1 || !(ol >= 1 && ol <= (double)((int64_t)1 << 24)) || !(scales[ax] > 0))) {
            err(im, "onnx: %s: axis %d: input '%s' resizes %lld to %g", desc, (int)ax,
                ss ? "scales" : "sizes", (long long)len, ol);
            return DL_ERR_UNSUPPORTED;
        }
        olens[ax] = (int64_t)ol;
        last = olens[ax] == len && scales[ax] == 1.0 ? last : ax;
    }
    if (last < 0) {
        return add_op(im, DL_IR_OP_IDENTITY, &x, 1, NULL, 0, out_name, "", out);
    }
    dl_ir_value *cur = x;
    for (int32_t ax = 0; ax <= last; ax++) {
        int64_t len = x->type.dims[ax].value, olen = olens[ax];
        double scale = scales[ax];
        if (olen == len && scale == 1.0) {
            continue;
        }
        if (x->type.dims[ax].sym >= 0) {
            err(im, "onnx: %s: axis %d: cannot resize %lld to %lld (a named dim)", desc, (int)ax,
                (long long)len, (long long)olen);
            return DL_ERR_UNSUPPORTED;
        }
        // idx[t * olen + o], w[t * olen + o]: tap t of output index o.
        double *idx = dl_mem_alloc((size_t)(taps * olen) * sizeof(double));
        double *w = dl_mem_alloc((size_t)(taps * olen) * sizeof(double));
        dl_status st = idx && w ? DL_OK : DL_ERR_NOMEM;
        for (int64_t o = 0; o < olen && st == DL_OK; o++) {
            double c; // the output index's coordinate in the input
            switch (ctm) {
            case 0:
                c = ((double)o + 0.5) / scale - 0.5;
                break;
            case 1:
                c = (double)o / scale;
                break;
            case 2: {
                // ONNX takes the resized length unrounded when scales are given.
                double lr = ss ? (double)len * scale : (double)olen;
                c = lr == 1 ? 0 : (double)o * (double)(len - 1) / (lr - 1);
                break;
            }
            case 3:
                c = olen > 1 ? ((double)o + 0.5) / scale - 0.5 : 0;
                break;
            default:
                c = ((double)o + 0.5) / scale;
                break;
            }
            int64_t src[RESIZE_MAX_TAPS]; // unclamped source indices
            double cw[RESIZE_MAX_TAPS] = {1, 0, 0, 0};
            double f = floor(c);
            if (nearest) {
                double fr = c - f;
                src[0] = (int64_t)(nm == 2     ? f
                                   : nm == 3   ? ceil(c)
                                   : fr == 0.5 ? (nm == 0 ? f : f + 1)
                                               : floor(c + 0.5));
            } else if (taps == 2) {
                src[0] = (int64_t)f, src[1] = (int64_t)f + 1;
                cw[1] = c - f;
                cw[0] = 1 - cw[1];
            } else {
                int64_t i = (int64_t)ceil(c) - 1;
                cubic_coeffs(c - (double)i, coeff_a, cw);
                // The reference takes the 4 indices nearest c from the input padded by 2 at
                // each end: a window that would leave the padding is moved inside it.
                int64_t t0 = i - 1 < -2 ? -2 : i - 1 > len - 2 ? len - 2 : i - 1;
                for (int t = 0; t < 4; t++) {
                    src[t] = t0 + t;
                }
            }
            double sum = 0;
            for (int t = 0; t < taps; t++) {
                if (exclude && (src[t] < 0 || src[t] >= len)) {
                    cw[t] = 0;
                }
                sum += cw[t];
            }
            for (int t = 0; t < taps; t++) {
                int64_t k = src[t] < 0 ? 0 : src[t] > len - 1 ? len - 1 : src[t];
                idx[t * olen + o] = (double)k;
                w[t * olen + o] = exclude && sum != 0 ? cw[t] / sum : cw[t];
            }
        }
        // [olen, 1, ...]: the weights broadcast over the axes after `ax`.
        int64_t wd[DL_MAX_RANK];
        int32_t wr = r - ax;
        wd[0] = olen;
        for (int32_t k = 1; k < wr; k++) {
            wd[k] = 1;
        }
        dl_ir_attr ga = attr_int("axis", ax);
        dl_ir_value *acc = NULL;
        for (int t = 0; t < taps && st == DL_OK; t++) {
            char tap[16] = "", suf[48];
            if (t > 0) {
                snprintf(tap, sizeof tap, "_%d", t);
            }
            bool final = ax == last && t == taps - 1;
            dl_ir_value *ci = NULL, *g = NULL, *wv = NULL, *m = NULL;
            snprintf(suf, sizeof suf, "_idx%d%s", (int)ax, tap);
            st = add_const(im, DL_DT_INT64, 1, &olen, idx + t * olen, olen, out_name, suf, &ci);
            if (st == DL_OK) {
                dl_ir_value *gi[2] = {cur, ci};
                snprintf(suf, sizeof suf, "_axis%d%s", (int)ax, tap);
                st = add_op(im, DL_IR_OP_GATHER, gi, 2, &ga, 1, out_name,
                            final && nearest ? "" : suf, &g);
            }
            if (st != DL_OK || nearest) {
                acc = g;
                continue;
            }
            snprintf(suf, sizeof suf, "_w%d%s", (int)ax, tap);
            st = add_const(im, x->type.dtype, wr, wd, w + t * olen, olen, out_name, suf, &wv);
            if (st == DL_OK) {
                dl_ir_value *p[2] = {g, wv};
                snprintf(suf, sizeof suf, "_p%d%s", (int)ax, tap);
                st = add_op(im, DL_IR_OP_MUL, p, 2, NULL, 0, out_name, suf, &m);
            }
            if (st == DL_OK && acc) {
                dl_ir_value *s2[2] = {acc, m};
                snprintf(suf, sizeof suf, "_sum%d%s", (int)ax, tap);
                st = add_op(im, DL_IR_OP_ADD, s2, 2, NULL, 0, out_name, final ? "" : suf, &m);
            }
            acc = m;
        }
        free(idx);
        free(w);
        DL_TRY(st);
        cur = acc;
    }
    *out = cur;
    return DL_OK;
}

// Most time steps an LSTM is unrolled over (about 20 nodes each).
#define LSTM_MAX_STEPS 1024

// LSTM (forward, layout 0, default activations, no peepholes / clip / sequence_lens), unrolled:
// XW = X @ W^T + Wb + Rb once, then per step t
//   g = XW[t] + H @ R^T;  i, o, f, c = split(g);  C = sigmoid(f) * C + sigmoid(i) * tanh(c);
//   H = sigmoid(o) * tanh(C);  Y[t] = H
// Outputs Y [T, 1, B, H], Y_h and Y_c [1, B, H]; a missing initial state is zero (its terms
// are left out).
static dl_status emit_lstm(imp *im, const Onnx__NodeProto *nd, const char *desc) {
    static const char *const allowed[] = {"hidden_size", "direction", "layout", "input_forget"};
    if (!only_attrs(im, nd, desc, allowed, DL_ARRAY_LEN(allowed)) ||
        !onnx_attr_str_is(nd, "direction", "forward", "forward") ||
        dl_fe__onnx_int_attr(nd, "layout", 0) != 0 ||
        dl_fe__onnx_int_attr(nd, "input_forget", 0) != 0 ||
        (nd->n_input > 4 && nd->input[4] && nd->input[4][0]) ||
        (nd->n_input > 7 && nd->input[7] && nd->input[7][0])) {
        err(im,
            "onnx: %s: only a forward LSTM with layout 0, the default activations and no clip, "
            "peepholes or sequence_lens is supported",
            desc);
        return DL_ERR_UNSUPPORTED;
    }
    dl_ir_value *x, *w, *r, *b, *h, *c;
    DL_TRY(operand(im, nd, 0, desc, &x));
    DL_TRY(operand(im, nd, 1, desc, &w));
    DL_TRY(operand(im, nd, 2, desc, &r));
    DL_TRY(operand(im, nd, 3, desc, &b));
    DL_TRY(operand(im, nd, 5, desc, &h));
    DL_TRY(operand(im, nd, 6, desc, &c));
    if (!x || !w || !r) {
        err(im, "onnx: %s: LSTM needs X, W and R", desc);
        return DL_ERR_UNSUPPORTED;
    }
    DL_TRY(known_type(im, x, desc, "X"));
    DL_TRY(known_type(im, w, desc, "W"));
    int64_t hs = dl_fe__onnx_int_attr(nd, "hidden_size", 0);
    int64_t steps = x->type.rank == 3 ? x->type.dims[0].value : -1;
    if (x->type.rank != 3 || x->type.dims[0].sym >= 0 || steps < 1 || steps > LSTM_MAX_STEPS ||
        hs < 1 || w->type.rank != 3 || w->type.dims[0].value != 1 ||
        w->type.dims[1].value != 4 * hs) {
        err(im,
            "onnx: %s: LSTM needs X [T, B, I] with a static T of at most %d, W [1, 4H, I] and "
            "hidden_size H",
            desc, LSTM_MAX_STEPS);
        return DL_ERR_UNSUPPORTED;
    }
    const char *base = nd->output[0] && nd->output[0][0] ? nd->output[0] : "lstm";
    int64_t ax0[1] = {0}, perm[2] = {1, 0}, ax01[2] = {0, 1};
    dl_ir_attr sq0 = attr_ints("axes", ax0, 1), tp = attr_ints("perm", perm, 2);
    dl_ir_value *wt, *rt, *xw, *tmp;
    // W [1, 4H, I] -> [I, 4H]; R [1, 4H, H] -> [H, 4H]
    DL_TRY(add_op(im, DL_IR_OP_SQUEEZE, &w, 1, &sq0, 1, base, "_W", &tmp));
    DL_TRY(add_op(im, DL_IR_OP_TRANSPOSE, &tmp, 1, &tp, 1, base, "_Wt", &wt));
    DL_TRY(add_op(im, DL_IR_OP_SQUEEZE, &r, 1, &sq0, 1, base, "_R", &tmp));
    DL_TRY(add_op(im, DL_IR_OP_TRANSPOSE, &tmp, 1, &tp, 1, base, "_Rt", &rt));
    dl_ir_value *mm[2] = {x, wt};
    DL_TRY(add_op(im, DL_IR_OP_MATMUL, mm, 2, NULL, 0, base, "_XW", &xw)); // [T, B, 4H]
    if (b) {
        // B [1, 8H] -> Wb + Rb [4H]
        int64_t s0[1] = {0}, e0[1] = {4 * hs}, s1[1] = {4 * hs}, e1[1] = {8 * hs}, a1[1] = {1};
        dl_ir_attr sl0[3] = {attr_ints("starts", s0, 1), attr_ints("ends", e0, 1),
                             attr_ints("axes", a1, 1)};
        dl_ir_attr sl1[3] = {attr_ints("starts", s1, 1), attr_ints("ends", e1, 1),
                             attr_ints("axes", a1, 1)};
        dl_ir_value *wb, *rb, *bs, *bb;
        DL_TRY(add_op(im, DL_IR_OP_SLICE, &b, 1, sl0, 3, base, "_Wb", &wb));
        DL_TRY(add_op(im, DL_IR_OP_SLICE, &b, 1, sl1, 3, base, "_Rb", &rb));
        dl_ir_value *ab[2] = {wb, rb};
        DL_TRY(add_op(im, DL_IR_OP_ADD, ab, 2, NULL, 0, base, "_bias", &bs));
        DL_TRY(add_op(im, DL_IR_OP_SQUEEZE, &bs, 1, &sq0, 1, base, "_bias1", &bb));
        dl_ir_value *xb[2] = {xw, bb};
        DL_TRY(add_op(im, DL_IR_OP_ADD, xb, 2, NULL, 0, base, "_XWb", &xw));
    }
    if (h) {
        DL_TRY(add_op(im, DL_IR_OP_SQUEEZE, &h, 1, &sq0, 1, base, "_h0", &h));
    }
    if (c) {
        DL_TRY(add_op(im, DL_IR_OP_SQUEEZE, &c, 1, &sq0, 1, base, "_c0", &c));
    }
    dl_ir_value **ys = dl_mem_calloc((size_t)steps, sizeof *ys);
    if (!ys) {
        return DL_ERR_NOMEM;
    }
    dl_status st = DL_OK;
    for (int64_t t = 0; t < steps && st == DL_OK; t++) {
        char suf[64];
        int64_t st0[1] = {t}, en0[1] = {t + 1};
        dl_ir_attr sl[3] = {attr_ints("starts", st0, 1), attr_ints("ends", en0, 1),
                            attr_ints("axes", ax0, 1)};
        dl_ir_value *g = NULL, *gate[4] = {NULL, NULL, NULL, NULL};
#define STEP_OP(OP, INS, N, ATTRS, NA, NAME, OUT)                                                  \
    do {                                                                                           \
        if (st == DL_OK) {                                                                         \
            snprintf(suf, sizeof suf, "_t%lld_%s", (long long)t, NAME);                            \
            st = add_op(im, OP, INS, N, ATTRS, NA, base, suf, OUT);                                \
        }                                                                                          \
    } while (0)
        STEP_OP(DL_IR_OP_SLICE, &xw, 1, sl, 3, "x", &tmp);
        STEP_OP(DL_IR_OP_SQUEEZE, &tmp, 1, &sq0, 1, "gx", &g); // [B, 4H]
        if (h) {
            dl_ir_value *hr[2] = {h, rt}, *hh = NULL;
            STEP_OP(DL_IR_OP_MATMUL, hr, 2, NULL, 0, "hr", &hh);
            dl_ir_value *gs[2] = {g, hh};
            STEP_OP(DL_IR_OP_ADD, gs, 2, NULL, 0, "g", &g);
        }
        static const char *const gn[4] = {"i", "o", "f", "c"};
        for (int k = 0; k < 4; k++) {
            int64_t gs0[1] = {k * hs}, ge0[1] = {(k + 1) * hs}, ga[1] = {1};
            dl_ir_attr gsl[3] = {attr_ints("starts", gs0, 1), attr_ints("ends", ge0, 1),
                                 attr_ints("axes", ga, 1)};
            char pre[8];
            snprintf(pre, sizeof pre, "%s_pre", gn[k]);
            STEP_OP(DL_IR_OP_SLICE, &g, 1, gsl, 3, pre, &tmp);
            STEP_OP(k == 3 ? DL_IR_OP_TANH : DL_IR_OP_SIGMOID, &tmp, 1, NULL, 0, gn[k], &gate[k]);
        }
        dl_ir_value *ic[2] = {gate[0], gate[3]}, *inew = NULL;
        STEP_OP(DL_IR_OP_MUL, ic, 2, NULL, 0, "ic", &inew);
        if (c) {
            dl_ir_value *fc[2] = {gate[2], c}, *keep = NULL;
            STEP_OP(DL_IR_OP_MUL, fc, 2, NULL, 0, "fc", &keep);
            dl_ir_value *cs[2] = {keep, inew};
            STEP_OP(DL_IR_OP_ADD, cs, 2, NULL, 0, "C", &c);
        } else {
            c = inew;
        }
        dl_ir_value *tc = NULL, *oh[2];
        STEP_OP(DL_IR_OP_TANH, &c, 1, NULL, 0, "tanhC", &tc);
        oh[0] = gate[1];
        oh[1] = tc;
        STEP_OP(DL_IR_OP_MUL, oh, 2, NULL, 0, "H", &h);
        dl_ir_attr ua = attr_ints("axes", ax01, 2);
        STEP_OP(DL_IR_OP_UNSQUEEZE, &h, 1, &ua, 1, "Y", &ys[t]); // [1, 1, B, H]
#undef STEP_OP
    }
    // Outputs under the node's names: Y = Concat(Y[t]), Y_h = H, Y_c = C with a direction axis.
    const char *on[3];
    for (size_t k = 0; k < 3; k++) {
        on[k] = k < nd->n_output && nd->output[k] && nd->output[k][0] ? nd->output[k] : NULL;
    }
    dl_ir_attr cat = attr_int("axis", 0);
    dl_ir_value *yv = NULL, *hv = NULL, *cv = NULL;
    if (st == DL_OK && on[0]) {
        st = add_op(im, DL_IR_OP_CONCAT, ys, (size_t)steps, &cat, 1, on[0], "", &yv);
    }
    free(ys);
    DL_TRY(st);
    if (on[1]) {
        DL_TRY(add_op(im, DL_IR_OP_UNSQUEEZE, &h, 1, &sq0, 1, on[1], "", &hv));
    }
    if (on[2]) {
        DL_TRY(add_op(im, DL_IR_OP_UNSQUEEZE, &c, 1, &sq0, 1, on[2], "", &cv));
    }
    dl_ir_value *vals[3] = {yv, hv, cv};
    for (size_t k = 0; k < 3; k++) {
        if (on[k]) {
            sym *s = sym_find(im, on[k]);
            DL_ASSERT(s);
            s->v = vals[k];
        }
    }
    return DL_OK;
}

// Emits decomposed op node `idx`.
static dl_status emit_decomposed(imp *im, size_t idx) {
    const Onnx__NodeProto *nd = im->g->node[idx];
    char desc[300];
    node_desc(nd, idx, desc, sizeof desc);
    const char *opn = nd->op_type ? nd->op_type : "";
    if (!strcmp(opn, "LSTM")) {
        return emit_lstm(im, nd, desc);
    }
    const char *on = nd->n_output && nd->output[0] && nd->output[0][0] ? nd->output[0] : NULL;
    if (!on || nd->n_output != 1) {
        err(im, "onnx: %s: expected one output", desc);
        return DL_ERR_UNSUPPORTED;
    }
    dl_ir_value *v = NULL;
    dl_status st;
    if (!strcmp(opn, "PRelu")) {
        st = emit_prelu(im, nd, desc, on, &v);
    } else if (!strcmp(opn, "InstanceNormalization")) {
        st = emit_instance_norm(im, nd, desc, on, &v);
    } else {
        st = emit_resize(im, nd, desc, on, &v);
    }
    DL_TRY(st);
    sym *s = sym_find(im, on);
    DL_ASSERT(s);
    s->v = v;
    return DL_OK;
}

// A 1-D Conv (W [M, C/group, k]) or ConvTranspose (W [C, M/group, k]) as a 2-D one over
// [N, C, 1, L]: X and W unsqueezed at axis 2, every spatial attribute given a leading entry for
// the unit dim (kernel_shape, strides, dilations and output_shape 1; pads and output_padding 0),
// the result squeezed. auto_pad passes through: on a unit dim with a unit kernel it pads nothing.
static dl_status emit_conv1d(imp *im, dl_arena *a, dl_ir_op op, const Onnx__NodeProto *nd,
                             const char *desc, dl_ir_attr *attrs, size_t n_attrs, dl_ir_value **ins,
                             size_t n_ins, const char *out_id, dl_ir_value **out) {
    static const char *const lifted[] = {"kernel_shape", "strides",        "dilations",
                                         "output_shape", "output_padding", "pads"};
    int64_t ax2[1] = {2};
    dl_ir_attr ua = attr_ints("axes", ax2, 1);
    const char *base = nd->output[0];
    const char *opn = dl_ir_op_get_info(op)->name;
    dl_ir_value *x2, *w2;
    DL_TRY(add_op(im, DL_IR_OP_UNSQUEEZE, &ins[0], 1, &ua, 1, base, "_2d", &x2));
    DL_TRY(add_op(im, DL_IR_OP_UNSQUEEZE, &ins[1], 1, &ua, 1, base, "_w2d", &w2));
    for (size_t k = 0; k < n_attrs; k++) {
        dl_ir_attr *at = &attrs[k];
        size_t li = 0;
        while (li < DL_ARRAY_LEN(lifted) && strcmp(at->name, lifted[li])) {
            li++;
        }
        if (at->kind != DL_IR_ATTR_INTS || at->n == 0 || li == DL_ARRAY_LEN(lifted)) {
            continue; // an empty list means the default, as for the 2-D op
        }
        bool pads = li == 5, zero_lead = li >= 4;
        if (at->n != (pads ? 2u : 1u)) {
            err(im, "onnx: %s: attribute '%s' must have %d values for a 1-D %s, got %zu", desc,
                at->name, pads ? 2 : 1, opn, at->n);
            return DL_ERR_UNSUPPORTED;
        }
        int64_t *v = DL_ARENA_NEWN(a, int64_t, 4);
        if (!v) {
            return DL_ERR_NOMEM;
        }
        if (pads) {
            v[0] = 0, v[1] = at->ints[0], v[2] = 0, v[3] = at->ints[1];
        } else {
            v[0] = zero_lead ? 0 : 1, v[1] = at->ints[0];
        }
        at->ints = v;
        at->n = pads ? 4 : 2;
        at->int_syms = NULL;
    }
    dl_ir_value *ci[3] = {x2, w2, n_ins > 2 ? ins[2] : NULL}, *y2;
    DL_TRY(add_op(im, op, ci, n_ins > 2 ? 3 : 2, attrs, n_attrs, base,
                  op == DL_IR_OP_CONV ? "_conv2d" : "_convt2d", &y2));
    dl_ir_value *y;
    DL_TRY(add_op(im, DL_IR_OP_SQUEEZE, &y2, 1, &ua, 1, out_id, "", &y));
    *out = y;
    return DL_OK;
}

// The INTS attribute `name` of a converted attribute list: its n values into v (n == want),
// else (absent or empty) `def` in every entry. False (with an error) for a list of another
// length.
static bool conv_ints(imp *im, const dl_ir_attr *attrs, size_t n_attrs, const char *name,
                      size_t want, int64_t def, const char *desc, const char *opn, int64_t *v) {
    for (size_t i = 0; i < want; i++) {
        v[i] = def;
    }
    for (size_t k = 0; k < n_attrs; k++) {
        if (attrs[k].kind == DL_IR_ATTR_INTS && attrs[k].n > 0 && !strcmp(attrs[k].name, name)) {
            if (attrs[k].n != want) {
                err(im, "onnx: %s: attribute '%s' must have %zu values for a 3-D %s, got %zu", desc,
                    name, want, opn, attrs[k].n);
                return false;
            }
            memcpy(v, attrs[k].ints, want * sizeof *v);
        }
    }
    return true;
}

// A 3-D Conv or ConvTranspose (`opn`) decomposes when X has rank 5 and its channels, depth,
// height and width and W's first two dims are known at import (N may be a named dim).
static dl_status conv3d_sizes_known(imp *im, const dl_ir_value *x, const dl_ir_value *w,
                                    const char *desc, const char *opn) {
    DL_TRY(known_type(im, x, desc, "input"));
    DL_TRY(known_type(im, w, desc, "weight"));
    const dl_ir_dim *xd = x->type.dims, *wd = w->type.dims;
    if (x->type.rank != 5 || xd[1].sym >= 0 || xd[2].sym >= 0 || xd[3].sym >= 0 || xd[4].sym >= 0 ||
        wd[0].sym >= 0 || wd[1].sym >= 0) {
        err(im,
            "onnx: %s: a 3-D %s needs X of rank 5 with its channels, depth, height and width "
            "known at import",
            desc, opn);
        return DL_ERR_UNSUPPORTED;
    }
    return DL_OK;
}

// A 3-D Conv (X [N, C, D, H, W], W [M, C/group, KD, KH, KW]) as one 2-D Conv: the depth windows
// become channels and the output depths batch rows. X is padded in depth (Pad), the KD slices of
// every output depth od gathered (Gather of the depths od * sd + kd * dd: [N, C, OD, KD, H, W]),
// moved to [N, OD, C, KD, H, W] (Transpose) and flattened to [N * OD, C * KD, H, W] (Reshape).
// W reshaped to [M, C/group * KD, KH, KW] puts W[m, c, kd] at channel c * KD + kd, so the
// channels of a group stay contiguous. The 2-D Conv (bias, group, the H and W strides,
// dilations and pads) gives [N * OD, M, OH, OW], reshaped to [N, OD, M, OH, OW] and transposed
// to [N, M, OD, OH, OW]. Every step is an op with a gradient, so the result trains. auto_pad
// SAME_UPPER / SAME_LOWER / VALID become explicit pads. C, D, H and W must be known at import
// (N may be a named dim).
static dl_status emit_conv3d(imp *im, const Onnx__NodeProto *nd, const char *desc,
                             const dl_ir_attr *attrs, size_t n_attrs, dl_ir_value **ins,
                             size_t n_ins, const char *out_id, dl_ir_value **out) {
    dl_ir_value *x = ins[0], *w = ins[1];
    DL_TRY(conv3d_sizes_known(im, x, w, desc, "Conv"));
    const dl_ir_dim *xd = x->type.dims, *wd = w->type.dims;
    int64_t C = xd[1].value, D = xd[2].value, H = xd[3].value, W = xd[4].value;
    int64_t M = wd[0].value, Cg = wd[1].value, K[3] = {wd[2].value, wd[3].value, wd[4].value};
    int64_t ks[3], st[3], dil[3], pads[6], group = 1;
    if (!conv_ints(im, attrs, n_attrs, "kernel_shape", 3, 0, desc, "Conv", ks) ||
        !conv_ints(im, attrs, n_attrs, "strides", 3, 1, desc, "Conv", st) ||
        !conv_ints(im, attrs, n_attrs, "dilations", 3, 1, desc, "Conv", dil) ||
        !conv_ints(im, attrs, n_attrs, "pads", 6, 0, desc, "Conv", pads)) {
        return DL_ERR_UNSUPPORTED;
    }
    const char *auto_pad = "NOTSET";
    for (size_t k = 0; k < n_attrs; k++) {
        if (!strcmp(attrs[k].name, "group") && attrs[k].kind == DL_IR_ATTR_INT) {
            group = attrs[k].i;
        } else if (!strcmp(attrs[k].name, "auto_pad") && attrs[k].kind == DL_IR_ATTR_STRING) {
            auto_pad = attrs[k].s;
        }
    }
    int64_t sizes[3] = {D, H, W};
    for (int k = 0; k < 3; k++) {
        if ((ks[k] && ks[k] != K[k]) || st[k] < 1 || dil[k] < 1) {
            err(im, "onnx: %s: kernel_shape, strides or dilations do not fit W %s", desc,
                "[M, C/group, KD, KH, KW]");
            return DL_ERR_UNSUPPORTED;
        }
        if (strcmp(auto_pad, "NOTSET") != 0) { // ONNX's rule for SAME_* and VALID
            int64_t total = 0;
            if (strcmp(auto_pad, "VALID") != 0) {
                int64_t o = (sizes[k] + st[k] - 1) / st[k];
                total = (o - 1) * st[k] + (K[k] - 1) * dil[k] + 1 - sizes[k];
                total = total > 0 ? total : 0;
            }
            bool upper = strcmp(auto_pad, "SAME_LOWER") != 0;
            pads[k] = upper ? total / 2 : total - total / 2;
            pads[k + 3] = total - pads[k];
        }
    }
    if (group < 1 || C != Cg * group || M % group != 0) {
        err(im, "onnx: %s: group %lld does not fit X's %lld channels and W [%lld, %lld, ...]", desc,
            (long long)group, (long long)C, (long long)M, (long long)Cg);
        return DL_ERR_UNSUPPORTED;
    }
    int64_t OD = (D + pads[0] + pads[3] - dil[0] * (K[0] - 1) - 1) / st[0] + 1;
    if (D + pads[0] + pads[3] - dil[0] * (K[0] - 1) - 1 < 0 || OD > ((int64_t)1 << 20)) {
        err(im, "onnx: %s: the kernel's depth %lld (dilation %lld) exceeds the padded depth %lld",
            desc, (long long)K[0], (long long)dil[0], (long long)(D + pads[0] + pads[3]));
        return DL_ERR_UNSUPPORTED;
    }
    const char *base = nd->output[0];
    dl_ir_value *cur = x;
    if (pads[0] || pads[3]) {
        int64_t pp[10] = {0, 0, pads[0], 0, 0, 0, 0, pads[3], 0, 0};
        dl_ir_attr pa = attr_ints("pads", pp, 10);
        DL_TRY(add_op(im, DL_IR_OP_PAD, &x, 1, &pa, 1, base, "_dpad", &cur));
    }
    int64_t n_idx = OD * K[0], idims[2] = {OD, K[0]};
    double *idx = dl_mem_alloc((size_t)n_idx * sizeof *idx);
    if (!idx) {
        return DL_ERR_NOMEM;
    }
    for (int64_t od = 0; od < OD; od++) {
        for (int64_t kd = 0; kd < K[0]; kd++) {
            idx[od * K[0] + kd] = (double)(od * st[0] + kd * dil[0]);
        }
    }
    dl_ir_value *ci = NULL, *g, *t, *x2, *w2, *y2, *y5;
    dl_status s = add_const(im, DL_DT_INT64, 2, idims, idx, n_idx, base, "_depths", &ci);
    free(idx);
    DL_TRY(s);
    dl_ir_value *gi[2] = {cur, ci};
    dl_ir_attr ga = attr_int("axis", 2);
    DL_TRY(add_op(im, DL_IR_OP_GATHER, gi, 2, &ga, 1, base, "_windows", &g));
    int64_t p6[6] = {0, 2, 1, 3, 4, 5}, p5[5] = {0, 2, 1, 3, 4};
    dl_ir_attr ta = attr_ints("perm", p6, 6);
    DL_TRY(add_op(im, DL_IR_OP_TRANSPOSE, &g, 1, &ta, 1, base, "_windows_t", &t));
    int64_t xs[4] = {-1, C * K[0], H, W}, ws[4] = {M, Cg * K[0], K[1], K[2]};
    dl_ir_attr xa = attr_ints("shape", xs, 4), wa = attr_ints("shape", ws, 4);
    DL_TRY(add_op(im, DL_IR_OP_RESHAPE, &t, 1, &xa, 1, base, "_2d", &x2));
    DL_TRY(add_op(im, DL_IR_OP_RESHAPE, &w, 1, &wa, 1, base, "_w2d", &w2));
    int64_t k2[2] = {K[1], K[2]}, s2[2] = {st[1], st[2]}, d2[2] = {dil[1], dil[2]};
    int64_t pd2[4] = {pads[1], pads[2], pads[4], pads[5]};
    dl_ir_attr ca[5] = {attr_ints("kernel_shape", k2, 2), attr_ints("strides", s2, 2),
                        attr_ints("dilations", d2, 2), attr_ints("pads", pd2, 4),
                        attr_int("group", group)};
    dl_ir_value *cin[3] = {x2, w2, n_ins > 2 ? ins[2] : NULL};
    DL_TRY(add_op(im, DL_IR_OP_CONV, cin, n_ins > 2 ? 3 : 2, ca, 5, base, "_conv2d", &y2));
    DL_TRY(known_type(im, y2, desc, "the 2-D convolution"));
    int64_t ys[5] = {-1, OD, M, y2->type.dims[2].value, y2->type.dims[3].value};
    dl_ir_attr ya = attr_ints("shape", ys, 5);
    DL_TRY(add_op(im, DL_IR_OP_RESHAPE, &y2, 1, &ya, 1, base, "_5d", &y5));
    dl_ir_attr tb = attr_ints("perm", p5, 5);
    return add_op(im, DL_IR_OP_TRANSPOSE, &y5, 1, &tb, 1, out_id, "", out);
}

// A 3-D ConvTranspose (X [N, C, D, H, W], W [C, M/group, KD, KH, KW], B [M]) as one 2-D
// ConvTranspose over H and W whose output channels carry the depth taps, then the depth overlap
// as a product with a constant 0/1 matrix:
//   X -> Transpose [N, D, C, H, W] -> Reshape [N * D, C, H, W];
//   W -> Reshape [C, M/group * KD, KH, KW] (W[c, m', kd] at channel m' * KD + kd: a group's
//   channels stay contiguous, and output channel m * KD + kd);
//   Z = ConvTranspose 2-D (the H and W strides, dilations, pads, output_padding, output_shape,
//   group and auto_pad: as the 2-D op handles them) [N * D, M * KD, OH, OW];
//   Z -> Reshape [N, D, M, KD, OH, OW] -> Transpose [N, M, OH, OW, D, KD] -> Reshape
//   [N * M * OH * OW, D * KD] -> MatMul S [D * KD, OD] -> Reshape [N, M, OH, OW, OD] ->
//   Transpose [N, M, OD, OH, OW], plus B unsqueezed to [M, 1, 1, 1];
// where S[d * KD + kd, od] = 1 when od = d * sd + kd * dd - pad_begin (the scatter of ONNX's
// definition). OD and pad_begin follow the evaluator's rule for a 2-D axis: explicit pads,
// VALID, SAME_* (OD = D * sd) or output_shape, whose total padding
// sd * (D - 1) + output_padding + (KD - 1) * dd + 1 - OD splits as SAME_UPPER: begin =
// floor(total / 2), otherwise total - floor(total / 2). Every step has a gradient, so X, W and B
// train (as for the 2-D op: explicit pads, and the weight only with group 1). C, D, H and W must
// be known at import (N may be a named dim).
static dl_status emit_convt3d(imp *im, const Onnx__NodeProto *nd, const char *desc,
                              const dl_ir_attr *attrs, size_t n_attrs, dl_ir_value **ins,
                              size_t n_ins, const char *out_id, dl_ir_value **out) {
    dl_ir_value *x = ins[0], *w = ins[1], *b = n_ins > 2 ? ins[2] : NULL;
    DL_TRY(conv3d_sizes_known(im, x, w, desc, "ConvTranspose"));
    const dl_ir_dim *xd = x->type.dims, *wd = w->type.dims;
    int64_t C = xd[1].value, D = xd[2].value, H = xd[3].value, W = xd[4].value;
    int64_t Mg = wd[1].value, K[3] = {wd[2].value, wd[3].value, wd[4].value};
    int64_t ks[3], st[3], dil[3], pads[6], opad[3], oshape[3], group = 1;
    if (!conv_ints(im, attrs, n_attrs, "kernel_shape", 3, 0, desc, "ConvTranspose", ks) ||
        !conv_ints(im, attrs, n_attrs, "strides", 3, 1, desc, "ConvTranspose", st) ||
        !conv_ints(im, attrs, n_attrs, "dilations", 3, 1, desc, "ConvTranspose", dil) ||
        !conv_ints(im, attrs, n_attrs, "pads", 6, 0, desc, "ConvTranspose", pads) ||
        !conv_ints(im, attrs, n_attrs, "output_padding", 3, 0, desc, "ConvTranspose", opad) ||
        !conv_ints(im, attrs, n_attrs, "output_shape", 3, 0, desc, "ConvTranspose", oshape)) {
        return DL_ERR_UNSUPPORTED;
    }
    const char *auto_pad = "NOTSET";
    bool has_os = false;
    for (size_t k = 0; k < n_attrs; k++) {
        if (!strcmp(attrs[k].name, "group") && attrs[k].kind == DL_IR_ATTR_INT) {
            group = attrs[k].i;
        } else if (!strcmp(attrs[k].name, "auto_pad") && attrs[k].kind == DL_IR_ATTR_STRING) {
            auto_pad = attrs[k].s;
        } else if (!strcmp(attrs[k].name, "output_shape") && attrs[k].n > 0) {
            has_os = true;
        }
    }
    for (int k = 0; k < 3; k++) {
        if ((ks[k] && ks[k] != K[k]) || st[k] < 1 || dil[k] < 1) {
            err(im,
                "onnx: %s: attribute 'kernel_shape', 'strides' or 'dilations' does not fit W %s",
                desc, "[C, M/group, KD, KH, KW]");
            return DL_ERR_UNSUPPORTED;
        }
    }
    if (group < 1 || C % group != 0 || wd[0].value != C) {
        err(im, "onnx: %s: attribute 'group' %lld does not fit X's %lld channels and W's %lld",
            desc, (long long)group, (long long)C, (long long)wd[0].value);
        return DL_ERR_UNSUPPORTED;
    }
    if (opad[0] < 0 || (opad[0] >= st[0] && opad[0] >= dil[0])) {
        err(im,
            "onnx: %s: attribute 'output_padding' %lld (depth) must be >= 0 and smaller than the "
            "stride %lld or the dilation %lld",
            desc, (long long)opad[0], (long long)st[0], (long long)dil[0]);
        return DL_ERR_UNSUPPORTED;
    }
    // Depth: the full output, then OD and the begin padding (negative: positions before the
    // first tap, which get only the bias).
    // Each limit keeps the products below int64's range: strides and dilations are any int64.
    const int64_t lim = (int64_t)1 << 24;
    bool big = D > lim || K[0] > lim || st[0] > lim || dil[0] > lim || Mg > lim || group > lim ||
               pads[0] > lim || pads[3] > lim || oshape[0] > lim;
    int64_t full = big ? 0 : st[0] * (D - 1) + opad[0] + (K[0] - 1) * dil[0] + 1, OD = 0, pb = 0;
    bool same = !strcmp(auto_pad, "SAME_UPPER") || !strcmp(auto_pad, "SAME_LOWER");
    if (big) {
        OD = 0;
    } else if (!strcmp(auto_pad, "VALID")) {
        pb = 0, OD = full;
    } else if (has_os || same) {
        OD = has_os ? oshape[0] : D * st[0];
        int64_t total = full - OD, half = total >= 0 ? total / 2 : -((-total + 1) / 2);
        pb = !strcmp(auto_pad, "SAME_UPPER") ? half : total - half;
    } else {
        pb = pads[0], OD = full - pads[0] - pads[3];
    }
    // D * K[0] <= 2^48; the matrix's size only once both factors are at most 2^24.
    int64_t M = Mg * group;
    int64_t n_s = OD > 0 && OD <= lim && D * K[0] <= lim ? D * K[0] * OD : lim + 1;
    if (OD < 1 || n_s > lim) {
        err(im,
            "onnx: %s: attributes 'pads', 'strides', 'dilations' and 'output_shape' give %lld "
            "output depths from %lld (at most 2^24 depth taps and outputs)",
            desc, (long long)OD, (long long)D);
        return DL_ERR_UNSUPPORTED;
    }
    const char *base = nd->output[0];
    dl_ir_value *xt, *x2, *w2, *z, *z6, *zt, *z2, *sm, *y2, *y5, *y;
    int64_t p5[5] = {0, 2, 1, 3, 4}, p6[6] = {0, 2, 4, 5, 1, 3}, po[5] = {0, 1, 4, 2, 3};
    dl_ir_attr ta = attr_ints("perm", p5, 5);
    DL_TRY(add_op(im, DL_IR_OP_TRANSPOSE, &x, 1, &ta, 1, base, "_depth_first", &xt));
    int64_t xs[4] = {-1, C, H, W}, ws[4] = {C, Mg * K[0], K[1], K[2]};
    dl_ir_attr xa = attr_ints("shape", xs, 4), wa = attr_ints("shape", ws, 4);
    DL_TRY(add_op(im, DL_IR_OP_RESHAPE, &xt, 1, &xa, 1, base, "_2d", &x2));
    DL_TRY(add_op(im, DL_IR_OP_RESHAPE, &w, 1, &wa, 1, base, "_w2d", &w2));
    // The 2-D op: the H and W entries of every spatial attribute, group and auto_pad.
    int64_t k2[2] = {K[1], K[2]}, s2[2] = {st[1], st[2]}, d2[2] = {dil[1], dil[2]};
    int64_t pd2[4] = {pads[1], pads[2], pads[4], pads[5]}, op2[2] = {opad[1], opad[2]};
    int64_t os2[2] = {oshape[1], oshape[2]};
    dl_ir_attr ca[8] = {attr_ints("kernel_shape", k2, 2),    attr_ints("strides", s2, 2),
                        attr_ints("dilations", d2, 2),       attr_ints("pads", pd2, 4),
                        attr_ints("output_padding", op2, 2), attr_int("group", group)};
    size_t n_ca = 6;
    if (strcmp(auto_pad, "NOTSET") != 0) {
        ca[n_ca++] =
            (dl_ir_attr){.name = "auto_pad", .kind = DL_IR_ATTR_STRING, .i_sym = -1, .s = auto_pad};
    }
    if (has_os) {
        ca[n_ca++] = attr_ints("output_shape", os2, 2);
    }
    dl_ir_value *cin[2] = {x2, w2};
    DL_TRY(add_op(im, DL_IR_OP_CONV_TRANSPOSE, cin, 2, ca, n_ca, base, "_convt2d", &z));
    DL_TRY(known_type(im, z, desc, "the 2-D transposed convolution"));
    int64_t OH = z->type.dims[2].value, OW = z->type.dims[3].value;
    int64_t zs[6] = {-1, D, M, K[0], OH, OW}, z2s[2] = {-1, D * K[0]};
    int64_t ys[5] = {-1, M, OH, OW, OD};
    dl_ir_attr za = attr_ints("shape", zs, 6), tza = attr_ints("perm", p6, 6);
    dl_ir_attr z2a = attr_ints("shape", z2s, 2), ya = attr_ints("shape", ys, 5);
    dl_ir_attr toa = attr_ints("perm", po, 5);
    DL_TRY(add_op(im, DL_IR_OP_RESHAPE, &z, 1, &za, 1, base, "_taps", &z6));
    DL_TRY(add_op(im, DL_IR_OP_TRANSPOSE, &z6, 1, &tza, 1, base, "_taps_t", &zt));
    DL_TRY(add_op(im, DL_IR_OP_RESHAPE, &zt, 1, &z2a, 1, base, "_taps_2d", &z2));
    double *sv = dl_mem_calloc((size_t)n_s, sizeof *sv);
    if (!sv) {
        return DL_ERR_NOMEM;
    }
    for (int64_t d = 0; d < D; d++) {
        for (int64_t kd = 0; kd < K[0]; kd++) {
            int64_t od = d * st[0] + kd * dil[0] - pb;
            if (od >= 0 && od < OD) {
                sv[(d * K[0] + kd) * OD + od] = 1;
            }
        }
    }
    int64_t sdims[2] = {D * K[0], OD};
    dl_status s = add_const(im, x->type.dtype, 2, sdims, sv, n_s, base, "_depth_scatter", &sm);
    free(sv);
    DL_TRY(s);
    dl_ir_value *mi[2] = {z2, sm};
    DL_TRY(add_op(im, DL_IR_OP_MATMUL, mi, 2, NULL, 0, base, "_depths", &y2));
    DL_TRY(add_op(im, DL_IR_OP_RESHAPE, &y2, 1, &ya, 1, base, "_5d", &y5));
    DL_TRY(
        add_op(im, DL_IR_OP_TRANSPOSE, &y5, 1, &toa, 1, b ? base : out_id, b ? "_nobias" : "", &y));
    if (!b) {
        *out = y;
        return DL_OK;
    }
    int64_t bax[3] = {1, 2, 3};
    dl_ir_attr ba = attr_ints("axes", bax, 3);
    dl_ir_value *b4;
    DL_TRY(add_op(im, DL_IR_OP_UNSQUEEZE, &b, 1, &ba, 1, base, "_bias", &b4));
    dl_ir_value *ai[2] = {y, b4};
    return add_op(im, DL_IR_OP_ADD, ai, 2, NULL, 0, out_id, "", out);
}

// Emits one ONNX node (not a Constant) as an IR node.
static dl_status emit_node(imp *im, dl_arena *a, size_t idx) {
    const Onnx__NodeProto *nd = im->g->node[idx];
    char desc[300];
    node_desc(nd, idx, desc, sizeof desc);
    dl_ir_op op = DL_IR_OP_IDENTITY;
    bool known = dl_ir_op_from_name(nd->op_type, &op);
    DL_ASSERT(known); // check_model rejected unknown ops
    size_t n_slots = nd->n_attribute + 5;
    dl_ir_attr *attrs = DL_ARENA_NEWN(a, dl_ir_attr, n_slots);
    dl_ir_value **ins = DL_ARENA_NEWN(a, dl_ir_value *, nd->n_input + 1);
    const char **onames = DL_ARENA_NEWN(a, const char *, nd->n_output + 1);
    if (!attrs || !ins || !onames) {
        return DL_ERR_NOMEM;
    }
    size_t n_attrs = 0, n_ins = 0;
    for (size_t k = 0; k < nd->n_attribute; k++) {
        if (!convert_attr(im, a, op, nd->attribute[k], desc, &attrs[n_attrs])) {
            return dl_diags_oom(im->d) ? DL_ERR_NOMEM : DL_ERR_UNSUPPORTED;
        }
        n_attrs++;
    }
    for (size_t k = 0; k < nd->n_input; k++) {
        const char *in = nd->input[k] ? nd->input[k] : "";
        sym *s = in[0] ? sym_find(im, in) : NULL;
        const char *an = attr_slot(op, k);
        if (an) {
            if (!s) {
                continue;
            }
            for (size_t j = 0; j < n_attrs; j++) {
                if (strcmp(attrs[j].name, an) == 0) {
                    err(im, "onnx: %s: '%s' is given both as attribute and as input %zu", desc, an,
                        k);
                    return DL_ERR_UNSUPPORTED;
                }
            }
            if (!s->cval) {
                err(im, "onnx: %s: input %zu ('%s') must be constant, but '%s' was not folded",
                    desc, k, an, in);
                return DL_ERR_UNSUPPORTED;
            }
            if (s->cval->rank > 1 || !int_dtype(s->cval->dtype) || s->cval->dtype == DL_DT_BOOL) {
                err(im,
                    "onnx: %s: input %zu ('%s') must be a 1-D integer tensor, not %s of rank %d",
                    desc, k, an, dl_dtype_name(s->cval->dtype), (int)s->cval->rank);
                return DL_ERR_UNSUPPORTED;
            }
            int64_t n = dl_tensor_numel(s->cval);
            if (n == 0 && empty_attr_is_absent(op)) {
                continue;
            }
            DL_TRY(slot_attr(im, a, op, s, an, desc, &attrs[n_attrs++]));
            continue;
        }
        if (s && !im->as_consts && is_stat_slot(op, k) && param_like(s) && stat_use_needs_copy(s)) {
            DL_TRY(emit_stat_copy(im, s, idx, k, &ins[n_ins++]));
            continue;
        }
        if (s && !s->v) {
            // A constant that reaches a real operand for the first time (a Constant node's
            // value is emitted where the node stood; initializers were emitted up front).
            if (!s->cval) {
                err(im,
                    "onnx: %s: input %zu '%s' has no value (its shape computation was not "
                    "folded)",
                    desc, k, in);
                return DL_ERR_UNSUPPORTED;
            }
            DL_TRY(emit_folded_constant(im, s, desc));
        }
        ins[n_ins++] = s ? s->v : NULL;
    }
    while (n_ins > 0 && !ins[n_ins - 1]) {
        n_ins--; // trailing omitted optional inputs
    }
    if ((op == DL_IR_OP_CONV || op == DL_IR_OP_CONV_TRANSPOSE) && n_ins >= 2 && ins[0] && ins[1] &&
        nd->n_output == 1 && nd->output[0] && nd->output[0][0] &&
        (ins[1]->type.rank == 3 || ins[1]->type.rank == 5)) {
        sym *o = sym_find(im, nd->output[0]);
        DL_ASSERT(o);
        if (ins[1]->type.rank == 3) {
            return emit_conv1d(im, a, op, nd, desc, attrs, n_attrs, ins, n_ins, nd->output[0],
                               &o->v);
        }
        return op == DL_IR_OP_CONV
                   ? emit_conv3d(im, nd, desc, attrs, n_attrs, ins, n_ins, nd->output[0], &o->v)
                   : emit_convt3d(im, nd, desc, attrs, n_attrs, ins, n_ins, nd->output[0], &o->v);
    }
    size_t n_outs = nd->n_output;
    while (n_outs > 0 && !(nd->output[n_outs - 1] && nd->output[n_outs - 1][0])) {
        n_outs--; // trailing omitted optional outputs
    }
    char **ids = DL_ARENA_NEWN(a, char *, n_outs + 1);
    if (!ids) {
        return DL_ERR_NOMEM;
    }
    // Identifiers are chosen one by one; make_ident remembers those handed out, so a node's own
    // outputs do not collide either.
    for (size_t k = 0; k < n_outs; k++) {
        const char *on = nd->output[k] ? nd->output[k] : "";
        char *id = make_ident(im, on[0] ? on : "_unused");
        if (!id) {
            return DL_ERR_NOMEM;
        }
        ids[k] = dl_arena_strdup(a, id);
        free(id);
        if (!ids[k]) {
            return DL_ERR_NOMEM;
        }
        onames[k] = ids[k];
    }
    dl_ir_node *node;
    dl_status st = dl_ir_module_add_node(im->m, op, ins, n_ins, onames, NULL, n_outs, attrs,
                                         n_attrs, DL_NO_LOC, &node);
    if (st != DL_OK) {
        if (st != DL_ERR_NOMEM) {
            err(im, "onnx: %s: cannot be added to the graph (%s)", desc, dl_status_str(st));
        }
        return st;
    }
    for (size_t k = 0; k < n_outs; k++) {
        const char *on = nd->output[k] ? nd->output[k] : "";
        if (on[0]) {
            sym *s = sym_find(im, on);
            DL_ASSERT(s);
            s->v = node->outputs[k];
        }
    }
    infer_node(im, node);
    return DL_OK;
}

// The output of node i when the node is an Identity alias of a param (see plan), else NULL.
static sym *alias_output(const imp *im, size_t i) {
    const Onnx__NodeProto *nd = im->g->node[i];
    if (nd->n_output != 1 || !nd->output[0] || !nd->output[0][0]) {
        return NULL;
    }
    sym *s = sym_find(im, nd->output[0]);
    return s && s->alias_of && s->alias_node == (int32_t)i ? s : NULL;
}

static dl_status emit(imp *im) {
    const Onnx__GraphProto *g = im->g;
    dl_ir_module *m = im->m;
    // Graph inputs; bound ones are constants and appear only where really used.
    DL_VEC(int32_t) src = {0};
    for (size_t i = 0; i < g->n_input; i++) {
        sym *s = sym_find(im, g->input[i]->name ? g->input[i]->name : "");
        if (!s || s->is_init || s->graph_input < 0 || s->v) {
            continue;
        }
        if (s->cval) {
            if (s->used) {
                DL_TRY(emit_constant(im, s, false));
            }
            continue;
        }
        dl_ir_type t;
        if (type_from_value_info(im, g->input[i], &t) != DL_OK) {
            continue;
        }
        char *id = make_ident(im, s->onnx);
        if (!id) {
            free(src.data);
            return DL_ERR_NOMEM;
        }
        dl_status st = dl_ir_module_add_input(m, id, &t, DL_NO_LOC, &s->v);
        free(id);
        if (st != DL_OK || !DL_VEC_PUSH(&src, s->graph_input)) {
            free(src.data);
            return st != DL_OK ? st : DL_ERR_NOMEM;
        }
    }
    if (im->info) {
        im->info->input_src = src.data;
        im->info->n_input_src = src.len;
    } else {
        free(src.data);
    }
    if (im->n_errors) {
        return DL_ERR_UNSUPPORTED;
    }
    // Initializers that something reads as a real operand, in initializer order, then the
    // Identity aliases of initializers that become params of their own, in node order.
    for (size_t i = 0; i < g->n_initializer; i++) {
        sym *s = sym_find(im, g->initializer[i]->name ? g->initializer[i]->name : "");
        if (s && s->is_init && s->used && !s->v && s->cval) {
            DL_TRY(emit_constant(im, s, !im->as_consts));
        }
    }
    for (size_t i = 0; i < g->n_node; i++) {
        sym *s = alias_output(im, i);
        if (s && s->used && !s->v) {
            DL_TRY(emit_alias_param(im, s));
        }
    }
    dl_arena scratch;
    dl_arena_init(&scratch);
    dl_status st = DL_OK;
    for (size_t i = 0; i < g->n_node && st == DL_OK; i++) {
        const Onnx__NodeProto *nd = g->node[i];
        if (strcmp(nd->op_type ? nd->op_type : "", "Constant") == 0) {
            sym *s = nd->n_output ? sym_find(im, nd->output[0] ? nd->output[0] : "") : NULL;
            if (s && s->used && !s->v && s->cval) {
                st = emit_constant(im, s, false);
            }
            continue;
        }
        if (alias_output(im, i)) {
            continue; // became a param of its own
        }
        const char *opn = nd->op_type ? nd->op_type : "";
        sym *o0 =
            nd->n_output && nd->output[0] && nd->output[0][0] ? sym_find(im, nd->output[0]) : NULL;
        if (import_only_op(opn) || (o0 && o0->fold)) {
            st = emit_folded(im, &scratch, i);
            continue;
        }
        if (decomposed_op(opn)) {
            st = emit_decomposed(im, i);
            continue;
        }
        st = emit_node(im, &scratch, i);
    }
    dl_arena_fini(&scratch);
    DL_TRY(st);
    for (size_t i = 0; i < g->n_output; i++) {
        const char *nm = g->output[i]->name ? g->output[i]->name : "";
        sym *s = sym_find(im, nm);
        if (s && !s->v && s->cval) {
            DL_TRY(emit_folded_constant(im, s, "graph output"));
        }
        if (!s || !s->v) {
            err(im, "onnx: graph output '%s' has no value", nm);
            return DL_ERR_UNSUPPORTED;
        }
        if (s->v->is_output) {
            err(im, "onnx: graph output '%s' is listed twice", nm);
            return DL_ERR_UNSUPPORTED;
        }
        DL_TRY(dl_ir_module_add_output(m, s->v, DL_NO_LOC));
    }
    return DL_OK;
}

// ---------------------------------------------------------------------------------------------
// Entry points

void dl_fe__onnx_info_fini(dl_fe_onnx_info *info) {
    if (!info) {
        return;
    }
    free(info->input_src);
    for (size_t i = 0; i < info->n_need_const; i++) {
        free(info->need_const_names[i]);
    }
    free(info->need_const_names);
    free(info->need_const);
    memset(info, 0, sizeof(*info));
}

// The import behind the entry points: from `data` when non-NULL, else from the file `path`;
// named dims get `sym_default`.
static dl_status import_once(const char *path, const void *data, size_t len,
                             const char *const *const_input_names,
                             const dl_tensor *const_input_values, size_t n_const,
                             bool initializers_as_consts, dl_fe_shape_fn shape_fn,
                             int64_t sym_default, dl_diags *d, dl_ir_module **out,
                             dl_fe_onnx_info *info) {
    *out = NULL;
    if (info) {
        memset(info, 0, sizeof(*info));
    }
    char why[512];
    Onnx__ModelProto *mp = NULL;
    dl_status st = data ? load_model_mem(data, len, path, &mp, why, sizeof why)
                        : load_model(path, &mp, why, sizeof why);
    if (st != DL_OK) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "onnx: %s", why);
        return st;
    }
    imp im = {0};
    im.d = d;
    im.model = mp;
    im.info = info;
    im.as_consts = initializers_as_consts;
    im.bind_names = const_input_names;
    im.bind_values = const_input_values;
    im.n_bind = n_const;
    im.shape_fn = shape_fn;
    im.sym_default = sym_default;
    if (shape_fn) {
        st = dl_diags_create(&im.shape_d);
        if (st != DL_OK) {
            goto out;
        }
    }
    st = check_model(mp, &im.opset, why, sizeof why);
    if (st != DL_OK) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "onnx: %s: %s", path, why);
        goto out;
    }
    im.g = mp->graph;
    st = plan(&im);
    if (st == DL_OK && im.n_errors) {
        st = DL_ERR_UNSUPPORTED;
    }
    if (st != DL_OK) {
        goto out;
    }
    {
        const char *gname = mp->graph->name && mp->graph->name[0] ? mp->graph->name : "onnx_model";
        char *name = sanitize(gname);
        if (!name) {
            st = DL_ERR_NOMEM;
            goto out;
        }
        st = dl_ir_module_create(name, &im.m);
        free(name);
        if (st != DL_OK) {
            goto out;
        }
    }
    st = emit(&im);
    if (st == DL_OK && im.n_errors) {
        st = DL_ERR_UNSUPPORTED;
    }
    if (st == DL_OK) {
        st = dl_ir_verify(im.m, d);
    }
    if (st != DL_OK && dl_diags_oom(d)) {
        st = DL_ERR_NOMEM; // a check that could not even record its finding ran out of memory
    }
    if (st == DL_OK) {
        *out = im.m;
        im.m = NULL;
    } else if (st == DL_ERR_NOMEM) {
        dl_diag(d, DL_SEV_ERROR, DL_NO_LOC, "onnx: %s: out of memory", path);
    }
out:
    dl_ir_module_destroy(im.m);
    dl_diags_destroy(im.shape_d);
    syms_free(&im);
    idents_free(&im);
    pb_release(mp);
    return st;
}

// The module's text without its `dim` lines (which hold the dims' values).
static char *text_without_dims(const dl_ir_module *m) {
    char *text = NULL;
    if (dl_ir_print(m, &text) != DL_OK) {
        return NULL;
    }
    char *w = text;
    for (const char *r = text; *r;) {
        const char *eol = strchr(r, '\n');
        size_t n = eol ? (size_t)(eol - r) + 1 : strlen(r);
        if (strncmp(r, "dim ", 4) != 0) {
            memmove(w, r, n);
            w += n;
        }
        r += n;
    }
    *w = '\0';
    return text;
}

// The value named dims get in the probe import: any value other than 1 that a shape computation
// is unlikely to produce by itself.
#define PROBE_DIM 7

// import_once, and for a model with named dims a second import with other dim values (see
// "Folding"): texts that differ mean a folded value depended on a dim without our knowing.
static dl_status import_onnx(const char *path, const void *data, size_t len,
                             const char *const *const_input_names,
                             const dl_tensor *const_input_values, size_t n_const,
                             bool initializers_as_consts, dl_fe_shape_fn shape_fn, dl_diags *d,
                             dl_ir_module **out, dl_fe_onnx_info *info) {
    dl_status st = import_once(path, data, len, const_input_names, const_input_values, n_const,
                               initializers_as_consts, shape_fn, 1, d, out, info);
    if (st != DL_OK || (*out)->dims.len == 0) {
        return st;
    }
    dl_diags *pd = NULL;
    dl_ir_module *probe = NULL;
    st = dl_diags_create(&pd);
    if (st == DL_OK) {
        st = import_once(path, data, len, const_input_names, const_input_values, n_const,
                         initializers_as_consts, shape_fn, PROBE_DIM, pd, &probe, NULL);
        if (st == DL_ERR_NOMEM) {
            goto out;
        }
        char *a = text_without_dims(*out), *b = probe ? text_without_dims(probe) : NULL;
        if (!a || (probe && !b)) {
            st = DL_ERR_NOMEM;
        } else if (!b || strcmp(a, b) != 0) {
            // The first line that differs says where.
            const char *pa = a, *pb = b ? b : "";
            while (*pa && *pa == *pb) {
                pa++;
                pb++;
            }
            while (pa > a && pa[-1] != '\n') {
                pa--;
            }
            const char *eol = strchr(pa, '\n');
            dl_diag(d, DL_SEV_ERROR, DL_NO_LOC,
                    "onnx: %s: a shape computation depends on the size of a named dim (%s) in a "
                    "way that cannot be folded: with the dim at %d instead of 1 the import %s "
                    "(first difference: `%.*s`); export with static sizes for those dims",
                    path, (*out)->dims.data[0].name, PROBE_DIM, b ? "differs" : "fails",
                    (int)(eol ? eol - pa : (ptrdiff_t)strlen(pa)), pa);
            st = DL_ERR_UNSUPPORTED;
        }
        free(a);
        free(b);
    }
out:
    dl_ir_module_destroy(probe);
    dl_diags_destroy(pd);
    if (st != DL_OK) {
        dl_ir_module_destroy(*out);
        *out = NULL;
    }
    return st;
}

dl_status dl_fe__import_onnx_ex(const char *path, const char *const *const_input_names,
                                const dl_tensor *const_input_values, size_t n_const,
                                bool initializers_as_consts, dl_fe_shape_fn shape, dl_diags *d,
                                dl_ir_module **out, dl_fe_onnx_info *info) {
    return import_onnx(path, NULL, 0, const_input_names, const_input_values, n_const,
                       initializers_as_consts, shape, d, out, info);
}

dl_status dl_fe__import_onnx_mem(const char *name, const void *data, size_t len,
                                 bool initializers_as_consts, dl_diags *d, dl_ir_module **out) {
    // A non-NULL pointer even for an empty image, which selects the in-memory path.
    static const uint8_t empty[1];
    return import_onnx(name, len ? data : empty, len, NULL, NULL, 0, initializers_as_consts, NULL,
                       d, out, NULL);
}

dl_status dl_fe_import_onnx(const char *path, bool initializers_as_consts, dl_diags *d,
                            dl_ir_module **out) {
    return dl_fe__import_onnx_ex(path, NULL, NULL, 0, initializers_as_consts, NULL, d, out, NULL);
}

dl_status dl_fe_import_onnx_shaped(const char *path, bool initializers_as_consts,
                                   dl_fe_shape_fn shape, dl_diags *d, dl_ir_module **out) {
    return dl_fe__import_onnx_ex(path, NULL, NULL, 0, initializers_as_consts, shape, d, out, NULL);
}
