/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

/* Bytes one value of a field of this type takes in a protobuf-c struct
 * (an element of a repeated field's array). */
size_t pbtxt_type_size(ProtobufCType type);
