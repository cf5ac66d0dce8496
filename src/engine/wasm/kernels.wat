;; Matrix kernels of the local engine in WebAssembly with 128-bit SIMD.
;;
;; Assembled into kernels-wasm.ts by `npm run build:wasm` (wabt's wat2wasm, pinned in
;; package.json); a test checks that the committed bytes are what this file assembles to.
;;
;; All matrices are row-major float32 in the shared memory imported as env.memory; every pointer
;; is a byte offset and every size a count of floats. The engine allocates its tensors inside
;; that memory, so the kernels read and write them in place.
;;
;; Summation order. Every output element is computed by the same sequence of float32 operations
;; whatever its position, so a row of a product does not depend on the other rows computed with
;; it (batched decoding of several sequences gives each sequence the bits it gets alone):
;;   gemm_nn: acc = (accumulate ? c : 0); for p = 0..k-1: acc = acc + a[i,p]·b[p,j]
;;   gemm_tn: acc = c; for p = 0..m-1: acc = acc + a[p,i]·b[p,j] (gemm_nn's order over Aᵀ)
;;   gemm_nt: four lane sums over p ≡ 0,1,2,3 (mod 4) in steps of four, added as
;;            (l0 + l1) + (l2 + l3), then the k mod 4 last products one by one, then added
;;            to c when accumulating.
;; There is no fused multiply-add in WebAssembly SIMD, so every product is rounded before it is
;; added, in the SIMD lanes and in the scalar remainders alike. Likewise the GELU kernels apply
;; the same float32 operations to every element, lane or remainder.
(module
  (import "env" "memory" (memory 1 65536 shared))

  ;; ---------------------------------------------------------------------------------------
  ;; C[m×n] (+)= A[m×k]·B[k×n]
  (func (export "gemm_nn")
    (param $c i32) (param $a i32) (param $b i32) (param $m i32) (param $k i32) (param $n i32) (param $accumulate i32)
    (call $gemm (local.get $c) (local.get $a) (local.get $b) (local.get $m) (local.get $k) (local.get $n)
      (local.get $accumulate) (i32.shl (local.get $k) (i32.const 2)) (i32.const 4)))

  ;; C[k×n] += A[m×k]ᵀ·B[m×n] (weight gradients), without transposing A: element (i, p) of Aᵀ is
  ;; element (p, i) of A, so the rows of Aᵀ are 4 bytes apart and their elements k·4 bytes apart.
  ;; Every element of C is summed in the order gemm_nn sums it over a transposed copy of A:
  ;; acc = c; for p = 0..m-1: acc = acc + a[p,i]·b[p,j].
  (func (export "gemm_tn")
    (param $c i32) (param $a i32) (param $b i32) (param $m i32) (param $k i32) (param $n i32)
    (call $gemm (local.get $c) (local.get $a) (local.get $b) (local.get $k) (local.get $m) (local.get $n)
      (i32.const 1) (i32.const 4) (i32.shl (local.get $k) (i32.const 2))))

  ;; C[m×n] (+)= A[m×k]·B[k×n] where element (i, p) of A is at a + i·arow + p·astep (bytes).
  ;;
  ;; Rows of C in blocks of 64 and the reduction in chunks of 128 (the 64×128 block of A stays
  ;; in the L1 cache whichever way it is laid out); inside them, strips of 8 columns swept by
  ;; tiles of 4 rows × 8 columns held in eight registers. Remainders: single rows, a strip of 4
  ;; columns, then single columns. A chunk after the first adds to what the previous chunks
  ;; left in C, so every element is still summed over p = 0..k-1 in order.
  (func $gemm
    (param $c i32) (param $a i32) (param $b i32) (param $m i32) (param $k i32) (param $n i32) (param $accumulate i32)
    (param $arow i32) (param $astep i32)
    (local $i0 i32) (local $iEnd i32) (local $p0 i32) (local $kc i32)
    (local.set $i0 (i32.const 0))
    (block $done
      (loop $blocks
        (br_if $done (i32.ge_u (local.get $i0) (local.get $m)))
        (local.set $iEnd (i32.add (local.get $i0) (i32.const 64)))
        (if (i32.gt_u (local.get $iEnd) (local.get $m)) (then (local.set $iEnd (local.get $m))))
        (local.set $p0 (i32.const 0))
        (loop $chunks
          (local.set $kc (i32.sub (local.get $k) (local.get $p0)))
          (if (i32.gt_u (local.get $kc) (i32.const 128)) (then (local.set $kc (i32.const 128))))
          (call $gemm_block
            (local.get $c) (i32.add (local.get $a) (i32.mul (local.get $p0) (local.get $astep)))
            (i32.add (local.get $b) (i32.mul (local.get $p0) (i32.shl (local.get $n) (i32.const 2))))
            (local.get $i0) (local.get $iEnd) (local.get $kc) (local.get $n)
            (i32.or (local.get $accumulate) (i32.ne (local.get $p0) (i32.const 0)))
            (local.get $arow) (local.get $astep))
          (local.set $p0 (i32.add (local.get $p0) (local.get $kc)))
          (br_if $chunks (i32.lt_u (local.get $p0) (local.get $k))))
        (local.set $i0 (local.get $iEnd))
        (br $blocks))))

  ;; Rows [i0, iEnd) of C (+)= the k columns of A from a times the k rows of B from b.
  (func $gemm_block
    (param $c i32) (param $a i32) (param $b i32) (param $i0 i32) (param $iEnd i32) (param $k i32) (param $n i32)
    (param $accumulate i32) (param $arow i32) (param $astep i32)
    (local $i i32) (local $j i32) (local $ldb i32)
    (local.set $ldb (i32.shl (local.get $n) (i32.const 2)))
    ;; strips of 8 columns
    (local.set $j (i32.const 0))
    (block $strips_done
      (loop $strips
        (br_if $strips_done (i32.gt_u (i32.add (local.get $j) (i32.const 8)) (local.get $n)))
        (local.set $i (local.get $i0))
        (block $rows4_done
          (loop $rows4
            (br_if $rows4_done (i32.gt_u (i32.add (local.get $i) (i32.const 4)) (local.get $iEnd)))
            (call $nn_4x8
              (call $at (local.get $c) (local.get $i) (local.get $j) (local.get $n))
              (i32.add (local.get $a) (i32.mul (local.get $i) (local.get $arow)))
              (i32.add (local.get $b) (i32.shl (local.get $j) (i32.const 2)))
              (local.get $k) (local.get $arow) (local.get $astep) (local.get $ldb) (local.get $accumulate))
            (local.set $i (i32.add (local.get $i) (i32.const 4)))
            (br $rows4)))
        (block $rows1_done
          (loop $rows1
            (br_if $rows1_done (i32.ge_u (local.get $i) (local.get $iEnd)))
            (call $nn_1x8
              (call $at (local.get $c) (local.get $i) (local.get $j) (local.get $n))
              (i32.add (local.get $a) (i32.mul (local.get $i) (local.get $arow)))
              (i32.add (local.get $b) (i32.shl (local.get $j) (i32.const 2)))
              (local.get $k) (local.get $astep) (local.get $ldb) (local.get $accumulate))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $rows1)))
        (local.set $j (i32.add (local.get $j) (i32.const 8)))
        (br $strips)))
    ;; a strip of 4 columns
    (if (i32.le_u (i32.add (local.get $j) (i32.const 4)) (local.get $n))
      (then
        (local.set $i (local.get $i0))
        (block $r_done
          (loop $r
            (br_if $r_done (i32.ge_u (local.get $i) (local.get $iEnd)))
            (call $nn_1x4
              (call $at (local.get $c) (local.get $i) (local.get $j) (local.get $n))
              (i32.add (local.get $a) (i32.mul (local.get $i) (local.get $arow)))
              (i32.add (local.get $b) (i32.shl (local.get $j) (i32.const 2)))
              (local.get $k) (local.get $astep) (local.get $ldb) (local.get $accumulate))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $r)))
        (local.set $j (i32.add (local.get $j) (i32.const 4)))))
    ;; single columns
    (block $cols_done
      (loop $cols
        (br_if $cols_done (i32.ge_u (local.get $j) (local.get $n)))
        (local.set $i (local.get $i0))
        (block $r_done
          (loop $r
            (br_if $r_done (i32.ge_u (local.get $i) (local.get $iEnd)))
            (call $nn_1x1
              (call $at (local.get $c) (local.get $i) (local.get $j) (local.get $n))
              (i32.add (local.get $a) (i32.mul (local.get $i) (local.get $arow)))
              (i32.add (local.get $b) (i32.shl (local.get $j) (i32.const 2)))
              (local.get $k) (local.get $astep) (local.get $ldb) (local.get $accumulate))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $r)))
        (local.set $j (i32.add (local.get $j) (i32.const 1)))
        (br $cols))))

  ;; Byte address of element (row, col) of a matrix at base with `cols` floats per row.
  (func $at (param $base i32) (param $row i32) (param $col i32) (param $cols i32) (result i32)
    (i32.add (local.get $base)
      (i32.shl (i32.add (i32.mul (local.get $row) (local.get $cols)) (local.get $col)) (i32.const 2))))

  ;; 4 rows × 8 columns of C; a: first of 4 rows of A (arow bytes apart, astep bytes between the
  ;; elements of a row); b: B at the strip's first column (ldb bytes per row, also C's row stride).
  (func $nn_4x8
    (param $c i32) (param $a i32) (param $b i32) (param $k i32) (param $arow i32) (param $astep i32) (param $ldb i32)
    (param $accumulate i32)
    (local $a1 i32) (local $a2 i32) (local $a3 i32) (local $end i32) (local $c1 i32) (local $c2 i32) (local $c3 i32)
    (local $x v128) (local $b0 v128) (local $b1 v128)
    (local $s00 v128) (local $s01 v128) (local $s10 v128) (local $s11 v128)
    (local $s20 v128) (local $s21 v128) (local $s30 v128) (local $s31 v128)
    (local.set $a1 (i32.add (local.get $a) (local.get $arow)))
    (local.set $a2 (i32.add (local.get $a1) (local.get $arow)))
    (local.set $a3 (i32.add (local.get $a2) (local.get $arow)))
    (local.set $c1 (i32.add (local.get $c) (local.get $ldb)))
    (local.set $c2 (i32.add (local.get $c1) (local.get $ldb)))
    (local.set $c3 (i32.add (local.get $c2) (local.get $ldb)))
    (if (local.get $accumulate)
      (then
        (local.set $s00 (v128.load (local.get $c)))
        (local.set $s01 (v128.load offset=16 (local.get $c)))
        (local.set $s10 (v128.load (local.get $c1)))
        (local.set $s11 (v128.load offset=16 (local.get $c1)))
        (local.set $s20 (v128.load (local.get $c2)))
        (local.set $s21 (v128.load offset=16 (local.get $c2)))
        (local.set $s30 (v128.load (local.get $c3)))
        (local.set $s31 (v128.load offset=16 (local.get $c3)))))
    (local.set $end (i32.add (local.get $a) (i32.mul (local.get $k) (local.get $astep))))
    (block $done
      (loop $p
        (br_if $done (i32.ge_u (local.get $a) (local.get $end)))
        (local.set $b0 (v128.load (local.get $b)))
        (local.set $b1 (v128.load offset=16 (local.get $b)))
        (local.set $x (v128.load32_splat (local.get $a)))
        (local.set $s00 (f32x4.add (local.get $s00) (f32x4.mul (local.get $x) (local.get $b0))))
        (local.set $s01 (f32x4.add (local.get $s01) (f32x4.mul (local.get $x) (local.get $b1))))
        (local.set $x (v128.load32_splat (local.get $a1)))
        (local.set $s10 (f32x4.add (local.get $s10) (f32x4.mul (local.get $x) (local.get $b0))))
        (local.set $s11 (f32x4.add (local.get $s11) (f32x4.mul (local.get $x) (local.get $b1))))
        (local.set $x (v128.load32_splat (local.get $a2)))
        (local.set $s20 (f32x4.add (local.get $s20) (f32x4.mul (local.get $x) (local.get $b0))))
        (local.set $s21 (f32x4.add (local.get $s21) (f32x4.mul (local.get $x) (local.get $b1))))
        (local.set $x (v128.load32_splat (local.get $a3)))
        (local.set $s30 (f32x4.add (local.get $s30) (f32x4.mul (local.get $x) (local.get $b0))))
        (local.set $s31 (f32x4.add (local.get $s31) (f32x4.mul (local.get $x) (local.get $b1))))
        (local.set $a (i32.add (local.get $a) (local.get $astep)))
        (local.set $a1 (i32.add (local.get $a1) (local.get $astep)))
        (local.set $a2 (i32.add (local.get $a2) (local.get $astep)))
        (local.set $a3 (i32.add (local.get $a3) (local.get $astep)))
        (local.set $b (i32.add (local.get $b) (local.get $ldb)))
        (br $p)))
    (v128.store (local.get $c) (local.get $s00))
    (v128.store offset=16 (local.get $c) (local.get $s01))
    (v128.store (local.get $c1) (local.get $s10))
    (v128.store offset=16 (local.get $c1) (local.get $s11))
    (v128.store (local.get $c2) (local.get $s20))
    (v128.store offset=16 (local.get $c2) (local.get $s21))
    (v128.store (local.get $c3) (local.get $s30))
    (v128.store offset=16 (local.get $c3) (local.get $s31)))

  ;; 1 row × 8 columns of C.
  (func $nn_1x8
    (param $c i32) (param $a i32) (param $b i32) (param $k i32) (param $astep i32) (param $ldb i32) (param $accumulate i32)
    (local $end i32) (local $x v128) (local $s0 v128) (local $s1 v128)
    (if (local.get $accumulate)
      (then
        (local.set $s0 (v128.load (local.get $c)))
        (local.set $s1 (v128.load offset=16 (local.get $c)))))
    (local.set $end (i32.add (local.get $a) (i32.mul (local.get $k) (local.get $astep))))
    (block $done
      (loop $p
        (br_if $done (i32.ge_u (local.get $a) (local.get $end)))
        (local.set $x (v128.load32_splat (local.get $a)))
        (local.set $s0 (f32x4.add (local.get $s0) (f32x4.mul (local.get $x) (v128.load (local.get $b)))))
        (local.set $s1 (f32x4.add (local.get $s1) (f32x4.mul (local.get $x) (v128.load offset=16 (local.get $b)))))
        (local.set $a (i32.add (local.get $a) (local.get $astep)))
        (local.set $b (i32.add (local.get $b) (local.get $ldb)))
        (br $p)))
    (v128.store (local.get $c) (local.get $s0))
    (v128.store offset=16 (local.get $c) (local.get $s1)))

  ;; 1 row × 4 columns of C.
  (func $nn_1x4
    (param $c i32) (param $a i32) (param $b i32) (param $k i32) (param $astep i32) (param $ldb i32) (param $accumulate i32)
    (local $end i32) (local $s v128)
    (if (local.get $accumulate) (then (local.set $s (v128.load (local.get $c)))))
    (local.set $end (i32.add (local.get $a) (i32.mul (local.get $k) (local.get $astep))))
    (block $done
      (loop $p
        (br_if $done (i32.ge_u (local.get $a) (local.get $end)))
        (local.set $s
          (f32x4.add (local.get $s) (f32x4.mul (v128.load32_splat (local.get $a)) (v128.load (local.get $b)))))
        (local.set $a (i32.add (local.get $a) (local.get $astep)))
        (local.set $b (i32.add (local.get $b) (local.get $ldb)))
        (br $p)))
    (v128.store (local.get $c) (local.get $s)))

  ;; One element of C.
  (func $nn_1x1
    (param $c i32) (param $a i32) (param $b i32) (param $k i32) (param $astep i32) (param $ldb i32) (param $accumulate i32)
    (local $end i32) (local $s f32)
    (if (local.get $accumulate) (then (local.set $s (f32.load (local.get $c)))))
    (local.set $end (i32.add (local.get $a) (i32.mul (local.get $k) (local.get $astep))))
    (block $done
      (loop $p
        (br_if $done (i32.ge_u (local.get $a) (local.get $end)))
        (local.set $s (f32.add (local.get $s) (f32.mul (f32.load (local.get $a)) (f32.load (local.get $b)))))
        (local.set $a (i32.add (local.get $a) (local.get $astep)))
        (local.set $b (i32.add (local.get $b) (local.get $ldb)))
        (br $p)))
    (f32.store (local.get $c) (local.get $s)))

  ;; ---------------------------------------------------------------------------------------
  ;; C[m×n] (+)= A[m×k]·B[n×k]ᵀ
  ;;
  ;; Dot products of contiguous rows. Rows of B in blocks of 64 (the block stays in L2), swept
  ;; by tiles of 2 rows of A × 4 rows of B. Remainders: a single row of A, then single rows of B.
  (func (export "gemm_nt")
    (param $c i32) (param $a i32) (param $b i32) (param $m i32) (param $k i32) (param $n i32) (param $accumulate i32)
    (local $j0 i32) (local $jEnd i32) (local $i i32) (local $j i32) (local $lda i32)
    (local.set $lda (i32.shl (local.get $k) (i32.const 2)))
    (local.set $j0 (i32.const 0))
    (block $done
      (loop $blocks
        (br_if $done (i32.ge_u (local.get $j0) (local.get $n)))
        (local.set $jEnd (i32.add (local.get $j0) (i32.const 64)))
        (if (i32.gt_u (local.get $jEnd) (local.get $n)) (then (local.set $jEnd (local.get $n))))
        (local.set $i (i32.const 0))
        (block $rows_done
          (loop $rows
            (br_if $rows_done (i32.ge_u (local.get $i) (local.get $m)))
            (if (i32.le_u (i32.add (local.get $i) (i32.const 2)) (local.get $m))
              (then
                (local.set $j (local.get $j0))
                (block $t_done
                  (loop $t
                    (br_if $t_done (i32.gt_u (i32.add (local.get $j) (i32.const 4)) (local.get $jEnd)))
                    (call $nt_2x4
                      (call $at (local.get $c) (local.get $i) (local.get $j) (local.get $n))
                      (call $at (local.get $a) (local.get $i) (i32.const 0) (local.get $k))
                      (call $at (local.get $b) (local.get $j) (i32.const 0) (local.get $k))
                      (local.get $k) (local.get $lda) (i32.shl (local.get $n) (i32.const 2)) (local.get $accumulate))
                    (local.set $j (i32.add (local.get $j) (i32.const 4)))
                    (br $t)))
                (block $s_done
                  (loop $s
                    (br_if $s_done (i32.ge_u (local.get $j) (local.get $jEnd)))
                    (call $nt_1x1
                      (call $at (local.get $c) (local.get $i) (local.get $j) (local.get $n))
                      (call $at (local.get $a) (local.get $i) (i32.const 0) (local.get $k))
                      (call $at (local.get $b) (local.get $j) (i32.const 0) (local.get $k))
                      (local.get $k) (local.get $accumulate))
                    (call $nt_1x1
                      (call $at (local.get $c) (i32.add (local.get $i) (i32.const 1)) (local.get $j) (local.get $n))
                      (call $at (local.get $a) (i32.add (local.get $i) (i32.const 1)) (i32.const 0) (local.get $k))
                      (call $at (local.get $b) (local.get $j) (i32.const 0) (local.get $k))
                      (local.get $k) (local.get $accumulate))
                    (local.set $j (i32.add (local.get $j) (i32.const 1)))
                    (br $s)))
                (local.set $i (i32.add (local.get $i) (i32.const 2))))
              (else
                (local.set $j (local.get $j0))
                (block $t_done
                  (loop $t
                    (br_if $t_done (i32.gt_u (i32.add (local.get $j) (i32.const 4)) (local.get $jEnd)))
                    (call $nt_1x4
                      (call $at (local.get $c) (local.get $i) (local.get $j) (local.get $n))
                      (call $at (local.get $a) (local.get $i) (i32.const 0) (local.get $k))
                      (call $at (local.get $b) (local.get $j) (i32.const 0) (local.get $k))
                      (local.get $k) (local.get $lda) (local.get $accumulate))
                    (local.set $j (i32.add (local.get $j) (i32.const 4)))
                    (br $t)))
                (block $s_done
                  (loop $s
                    (br_if $s_done (i32.ge_u (local.get $j) (local.get $jEnd)))
                    (call $nt_1x1
                      (call $at (local.get $c) (local.get $i) (local.get $j) (local.get $n))
                      (call $at (local.get $a) (local.get $i) (i32.const 0) (local.get $k))
                      (call $at (local.get $b) (local.get $j) (i32.const 0) (local.get $k))
                      (local.get $k) (local.get $accumulate))
                    (local.set $j (i32.add (local.get $j) (i32.const 1)))
                    (br $s)))
                (local.set $i (i32.add (local.get $i) (i32.const 1)))))
            (br $rows)))
        (local.set $j0 (local.get $jEnd))
        (br $blocks))))

  ;; (l0 + l1) + (l2 + l3) of a vector of four partial sums.
  (func $hsum (param $v v128) (result f32)
    (f32.add
      (f32.add (f32x4.extract_lane 0 (local.get $v)) (f32x4.extract_lane 1 (local.get $v)))
      (f32.add (f32x4.extract_lane 2 (local.get $v)) (f32x4.extract_lane 3 (local.get $v)))))

  ;; Finishes one dot product: the lane sums, then the products at p = k4..k-1 one by one, then
  ;; stored into (or added to) *c. a and b point at element k4 of their rows.
  (func $nt_finish
    (param $c i32) (param $v v128) (param $a i32) (param $b i32) (param $rest i32) (param $accumulate i32)
    (local $s f32)
    (local.set $s (call $hsum (local.get $v)))
    (block $done
      (loop $p
        (br_if $done (i32.eqz (local.get $rest)))
        (local.set $s (f32.add (local.get $s) (f32.mul (f32.load (local.get $a)) (f32.load (local.get $b)))))
        (local.set $a (i32.add (local.get $a) (i32.const 4)))
        (local.set $b (i32.add (local.get $b) (i32.const 4)))
        (local.set $rest (i32.sub (local.get $rest) (i32.const 1)))
        (br $p)))
    (if (local.get $accumulate) (then (local.set $s (f32.add (f32.load (local.get $c)) (local.get $s)))))
    (f32.store (local.get $c) (local.get $s)))

  ;; 2 rows of A (lda bytes apart) against 4 rows of B (lda bytes apart); C rows ldc bytes apart.
  (func $nt_2x4
    (param $c i32) (param $a i32) (param $b i32) (param $k i32) (param $lda i32) (param $ldc i32) (param $accumulate i32)
    (local $a1 i32) (local $b1 i32) (local $b2 i32) (local $b3 i32) (local $o i32) (local $end i32) (local $k4 i32)
    (local $x v128) (local $y v128) (local $v0 v128) (local $v1 v128) (local $v2 v128) (local $v3 v128)
    (local $s0 v128) (local $s1 v128) (local $s2 v128) (local $s3 v128)
    (local $t0 v128) (local $t1 v128) (local $t2 v128) (local $t3 v128)
    (local.set $a1 (i32.add (local.get $a) (local.get $lda)))
    (local.set $b1 (i32.add (local.get $b) (local.get $lda)))
    (local.set $b2 (i32.add (local.get $b1) (local.get $lda)))
    (local.set $b3 (i32.add (local.get $b2) (local.get $lda)))
    (local.set $k4 (i32.shl (i32.shr_u (local.get $k) (i32.const 2)) (i32.const 4)))
    (local.set $o (i32.const 0))
    (block $done
      (loop $p
        (br_if $done (i32.ge_u (local.get $o) (local.get $k4)))
        (local.set $x (v128.load (i32.add (local.get $a) (local.get $o))))
        (local.set $y (v128.load (i32.add (local.get $a1) (local.get $o))))
        (local.set $v0 (v128.load (i32.add (local.get $b) (local.get $o))))
        (local.set $v1 (v128.load (i32.add (local.get $b1) (local.get $o))))
        (local.set $v2 (v128.load (i32.add (local.get $b2) (local.get $o))))
        (local.set $v3 (v128.load (i32.add (local.get $b3) (local.get $o))))
        (local.set $s0 (f32x4.add (local.get $s0) (f32x4.mul (local.get $x) (local.get $v0))))
        (local.set $s1 (f32x4.add (local.get $s1) (f32x4.mul (local.get $x) (local.get $v1))))
        (local.set $s2 (f32x4.add (local.get $s2) (f32x4.mul (local.get $x) (local.get $v2))))
        (local.set $s3 (f32x4.add (local.get $s3) (f32x4.mul (local.get $x) (local.get $v3))))
        (local.set $t0 (f32x4.add (local.get $t0) (f32x4.mul (local.get $y) (local.get $v0))))
        (local.set $t1 (f32x4.add (local.get $t1) (f32x4.mul (local.get $y) (local.get $v1))))
        (local.set $t2 (f32x4.add (local.get $t2) (f32x4.mul (local.get $y) (local.get $v2))))
        (local.set $t3 (f32x4.add (local.get $t3) (f32x4.mul (local.get $y) (local.get $v3))))
        (local.set $o (i32.add (local.get $o) (i32.const 16)))
        (br $p)))
    (local.set $end (i32.sub (local.get $k) (i32.shr_u (local.get $k4) (i32.const 2))))
    (call $nt_finish (local.get $c) (local.get $s0)
      (i32.add (local.get $a) (local.get $k4)) (i32.add (local.get $b) (local.get $k4)) (local.get $end) (local.get $accumulate))
    (call $nt_finish (i32.add (local.get $c) (i32.const 4)) (local.get $s1)
      (i32.add (local.get $a) (local.get $k4)) (i32.add (local.get $b1) (local.get $k4)) (local.get $end) (local.get $accumulate))
    (call $nt_finish (i32.add (local.get $c) (i32.const 8)) (local.get $s2)
      (i32.add (local.get $a) (local.get $k4)) (i32.add (local.get $b2) (local.get $k4)) (local.get $end) (local.get $accumulate))
    (call $nt_finish (i32.add (local.get $c) (i32.const 12)) (local.get $s3)
      (i32.add (local.get $a) (local.get $k4)) (i32.add (local.get $b3) (local.get $k4)) (local.get $end) (local.get $accumulate))
    (local.set $c (i32.add (local.get $c) (local.get $ldc)))
    (call $nt_finish (local.get $c) (local.get $t0)
      (i32.add (local.get $a1) (local.get $k4)) (i32.add (local.get $b) (local.get $k4)) (local.get $end) (local.get $accumulate))
    (call $nt_finish (i32.add (local.get $c) (i32.const 4)) (local.get $t1)
      (i32.add (local.get $a1) (local.get $k4)) (i32.add (local.get $b1) (local.get $k4)) (local.get $end) (local.get $accumulate))
    (call $nt_finish (i32.add (local.get $c) (i32.const 8)) (local.get $t2)
      (i32.add (local.get $a1) (local.get $k4)) (i32.add (local.get $b2) (local.get $k4)) (local.get $end) (local.get $accumulate))
    (call $nt_finish (i32.add (local.get $c) (i32.const 12)) (local.get $t3)
      (i32.add (local.get $a1) (local.get $k4)) (i32.add (local.get $b3) (local.get $k4)) (local.get $end) (local.get $accumulate)))

  ;; 1 row of A against 4 rows of B (lda bytes apart).
  (func $nt_1x4
    (param $c i32) (param $a i32) (param $b i32) (param $k i32) (param $lda i32) (param $accumulate i32)
    (local $b1 i32) (local $b2 i32) (local $b3 i32) (local $o i32) (local $end i32) (local $k4 i32)
    (local $x v128) (local $s0 v128) (local $s1 v128) (local $s2 v128) (local $s3 v128)
    (local.set $b1 (i32.add (local.get $b) (local.get $lda)))
    (local.set $b2 (i32.add (local.get $b1) (local.get $lda)))
    (local.set $b3 (i32.add (local.get $b2) (local.get $lda)))
    (local.set $k4 (i32.shl (i32.shr_u (local.get $k) (i32.const 2)) (i32.const 4)))
    (local.set $o (i32.const 0))
    (block $done
      (loop $p
        (br_if $done (i32.ge_u (local.get $o) (local.get $k4)))
        (local.set $x (v128.load (i32.add (local.get $a) (local.get $o))))
        (local.set $s0 (f32x4.add (local.get $s0) (f32x4.mul (local.get $x) (v128.load (i32.add (local.get $b) (local.get $o))))))
        (local.set $s1 (f32x4.add (local.get $s1) (f32x4.mul (local.get $x) (v128.load (i32.add (local.get $b1) (local.get $o))))))
        (local.set $s2 (f32x4.add (local.get $s2) (f32x4.mul (local.get $x) (v128.load (i32.add (local.get $b2) (local.get $o))))))
        (local.set $s3 (f32x4.add (local.get $s3) (f32x4.mul (local.get $x) (v128.load (i32.add (local.get $b3) (local.get $o))))))
        (local.set $o (i32.add (local.get $o) (i32.const 16)))
        (br $p)))
    (local.set $end (i32.sub (local.get $k) (i32.shr_u (local.get $k4) (i32.const 2))))
    (local.set $a (i32.add (local.get $a) (local.get $k4)))
    (call $nt_finish (local.get $c) (local.get $s0)
      (local.get $a) (i32.add (local.get $b) (local.get $k4)) (local.get $end) (local.get $accumulate))
    (call $nt_finish (i32.add (local.get $c) (i32.const 4)) (local.get $s1)
      (local.get $a) (i32.add (local.get $b1) (local.get $k4)) (local.get $end) (local.get $accumulate))
    (call $nt_finish (i32.add (local.get $c) (i32.const 8)) (local.get $s2)
      (local.get $a) (i32.add (local.get $b2) (local.get $k4)) (local.get $end) (local.get $accumulate))
    (call $nt_finish (i32.add (local.get $c) (i32.const 12)) (local.get $s3)
      (local.get $a) (i32.add (local.get $b3) (local.get $k4)) (local.get $end) (local.get $accumulate)))

  ;; One dot product.
  (func $nt_1x1 (param $c i32) (param $a i32) (param $b i32) (param $k i32) (param $accumulate i32)
    (local $o i32) (local $k4 i32) (local $s v128)
    (local.set $k4 (i32.shl (i32.shr_u (local.get $k) (i32.const 2)) (i32.const 4)))
    (local.set $o (i32.const 0))
    (block $done
      (loop $p
        (br_if $done (i32.ge_u (local.get $o) (local.get $k4)))
        (local.set $s
          (f32x4.add (local.get $s)
            (f32x4.mul (v128.load (i32.add (local.get $a) (local.get $o))) (v128.load (i32.add (local.get $b) (local.get $o))))))
        (local.set $o (i32.add (local.get $o) (i32.const 16)))
        (br $p)))
    (call $nt_finish (local.get $c) (local.get $s)
      (i32.add (local.get $a) (local.get $k4)) (i32.add (local.get $b) (local.get $k4))
      (i32.sub (local.get $k) (i32.shr_u (local.get $k4) (i32.const 2))) (local.get $accumulate)))

  ;; ---------------------------------------------------------------------------------------
  ;; GELU (tanh approximation, as in GPT-2) and its derivative, element by element in float32:
  ;; four lanes at a time, then the n mod 4 last elements one by one with the same operations.
  ;; tanh is the rational minimax approximation of the TypeScript kernels (layers.ts), in float32.

  (func $tanh4 (param $x v128) (result v128)
    (local $x2 v128) (local $p v128) (local $q v128)
    (local.set $x (f32x4.min (f32x4.max (local.get $x) (f32x4.splat (f32.const -7.99881172180175781)))
      (f32x4.splat (f32.const 7.99881172180175781))))
    (local.set $x2 (f32x4.mul (local.get $x) (local.get $x)))
    (local.set $p (f32x4.splat (f32.const -2.76076847742355e-16)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $x2)) (f32x4.splat (f32.const 2.00018790482477e-13))))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $x2)) (f32x4.splat (f32.const -8.60467152213735e-11))))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $x2)) (f32x4.splat (f32.const 5.12229709037114e-8))))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $x2)) (f32x4.splat (f32.const 1.48572235717979e-5))))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $x2)) (f32x4.splat (f32.const 6.37261928875436e-4))))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $x2)) (f32x4.splat (f32.const 4.89352455891786e-3))))
    (local.set $q (f32x4.splat (f32.const 1.19825839466702e-6)))
    (local.set $q (f32x4.add (f32x4.mul (local.get $q) (local.get $x2)) (f32x4.splat (f32.const 1.18534705686654e-4))))
    (local.set $q (f32x4.add (f32x4.mul (local.get $q) (local.get $x2)) (f32x4.splat (f32.const 2.268434632439e-3))))
    (local.set $q (f32x4.add (f32x4.mul (local.get $q) (local.get $x2)) (f32x4.splat (f32.const 4.89352518554385e-3))))
    (f32x4.div (f32x4.mul (local.get $x) (local.get $p)) (local.get $q)))

  (func $tanh1 (param $x f32) (result f32)
    (local $x2 f32) (local $p f32) (local $q f32)
    (local.set $x (f32.min (f32.max (local.get $x) (f32.const -7.99881172180175781)) (f32.const 7.99881172180175781)))
    (local.set $x2 (f32.mul (local.get $x) (local.get $x)))
    (local.set $p (f32.const -2.76076847742355e-16))
    (local.set $p (f32.add (f32.mul (local.get $p) (local.get $x2)) (f32.const 2.00018790482477e-13)))
    (local.set $p (f32.add (f32.mul (local.get $p) (local.get $x2)) (f32.const -8.60467152213735e-11)))
    (local.set $p (f32.add (f32.mul (local.get $p) (local.get $x2)) (f32.const 5.12229709037114e-8)))
    (local.set $p (f32.add (f32.mul (local.get $p) (local.get $x2)) (f32.const 1.48572235717979e-5)))
    (local.set $p (f32.add (f32.mul (local.get $p) (local.get $x2)) (f32.const 6.37261928875436e-4)))
    (local.set $p (f32.add (f32.mul (local.get $p) (local.get $x2)) (f32.const 4.89352455891786e-3)))
    (local.set $q (f32.const 1.19825839466702e-6))
    (local.set $q (f32.add (f32.mul (local.get $q) (local.get $x2)) (f32.const 1.18534705686654e-4)))
    (local.set $q (f32.add (f32.mul (local.get $q) (local.get $x2)) (f32.const 2.268434632439e-3)))
    (local.set $q (f32.add (f32.mul (local.get $q) (local.get $x2)) (f32.const 4.89352518554385e-3)))
    (f32.div (f32.mul (local.get $x) (local.get $p)) (local.get $q)))

  ;; √(2/π)·(v + 0.044715·v³), the argument of tanh.
  (func $gelu_arg4 (param $v v128) (result v128)
    (f32x4.mul (f32x4.splat (f32.const 0.7978845608028654))
      (f32x4.add (local.get $v)
        (f32x4.mul (f32x4.splat (f32.const 0.044715))
          (f32x4.mul (local.get $v) (f32x4.mul (local.get $v) (local.get $v)))))))

  (func $gelu_arg1 (param $v f32) (result f32)
    (f32.mul (f32.const 0.7978845608028654)
      (f32.add (local.get $v) (f32.mul (f32.const 0.044715) (f32.mul (local.get $v) (f32.mul (local.get $v) (local.get $v)))))))

  ;; out[i] = 0.5·v·(1 + tanh(arg(v))) for v = x[i], i < n; out may be x.
  (func (export "gelu_forward") (param $out i32) (param $x i32) (param $n i32)
    (local $end i32) (local $end4 i32) (local $v v128) (local $s f32)
    (local.set $end (i32.add (local.get $x) (i32.shl (local.get $n) (i32.const 2))))
    (local.set $end4 (i32.add (local.get $x) (i32.shl (i32.and (local.get $n) (i32.const -4)) (i32.const 2))))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $x) (local.get $end4)))
        (local.set $v (v128.load (local.get $x)))
        (v128.store (local.get $out)
          (f32x4.mul (f32x4.mul (f32x4.splat (f32.const 0.5)) (local.get $v))
            (f32x4.add (f32x4.splat (f32.const 1)) (call $tanh4 (call $gelu_arg4 (local.get $v))))))
        (local.set $x (i32.add (local.get $x) (i32.const 16)))
        (local.set $out (i32.add (local.get $out) (i32.const 16)))
        (br $l)))
    (block $done1
      (loop $l1
        (br_if $done1 (i32.ge_u (local.get $x) (local.get $end)))
        (local.set $s (f32.load (local.get $x)))
        (f32.store (local.get $out)
          (f32.mul (f32.mul (f32.const 0.5) (local.get $s))
            (f32.add (f32.const 1) (call $tanh1 (call $gelu_arg1 (local.get $s))))))
        (local.set $x (i32.add (local.get $x) (i32.const 4)))
        (local.set $out (i32.add (local.get $out) (i32.const 4)))
        (br $l1))))

  ;; grad[i] *= GELU′(x[i]) = 0.5·(1 + t) + 0.5·v·(1 − t²)·√(2/π)·(1 + 3·0.044715·v²), t = tanh(arg(v)).
  (func (export "gelu_backward") (param $grad i32) (param $x i32) (param $n i32)
    (local $end i32) (local $end4 i32) (local $v v128) (local $t v128) (local $s f32) (local $u f32)
    (local.set $end (i32.add (local.get $x) (i32.shl (local.get $n) (i32.const 2))))
    (local.set $end4 (i32.add (local.get $x) (i32.shl (i32.and (local.get $n) (i32.const -4)) (i32.const 2))))
    (block $done
      (loop $l
        (br_if $done (i32.ge_u (local.get $x) (local.get $end4)))
        (local.set $v (v128.load (local.get $x)))
        (local.set $t (call $tanh4 (call $gelu_arg4 (local.get $v))))
        (v128.store (local.get $grad)
          (f32x4.mul (v128.load (local.get $grad))
            (f32x4.add
              (f32x4.mul (f32x4.splat (f32.const 0.5)) (f32x4.add (f32x4.splat (f32.const 1)) (local.get $t)))
              (f32x4.mul (f32x4.mul (f32x4.splat (f32.const 0.5)) (local.get $v))
                (f32x4.mul
                  (f32x4.mul (f32x4.sub (f32x4.splat (f32.const 1)) (f32x4.mul (local.get $t) (local.get $t)))
                    (f32x4.splat (f32.const 0.7978845608028654)))
                  (f32x4.add (f32x4.splat (f32.const 1))
                    (f32x4.mul (f32x4.splat (f32.const 0.134145)) (f32x4.mul (local.get $v) (local.get $v)))))))))
        (local.set $x (i32.add (local.get $x) (i32.const 16)))
        (local.set $grad (i32.add (local.get $grad) (i32.const 16)))
        (br $l)))
    (block $done1
      (loop $l1
        (br_if $done1 (i32.ge_u (local.get $x) (local.get $end)))
        (local.set $s (f32.load (local.get $x)))
        (local.set $u (call $tanh1 (call $gelu_arg1 (local.get $s))))
        (f32.store (local.get $grad)
          (f32.mul (f32.load (local.get $grad))
            (f32.add
              (f32.mul (f32.const 0.5) (f32.add (f32.const 1) (local.get $u)))
              (f32.mul (f32.mul (f32.const 0.5) (local.get $s))
                (f32.mul
                  (f32.mul (f32.sub (f32.const 1) (f32.mul (local.get $u) (local.get $u))) (f32.const 0.7978845608028654))
                  (f32.add (f32.const 1) (f32.mul (f32.const 0.134145) (f32.mul (local.get $s) (local.get $s)))))))))
        (local.set $x (i32.add (local.get $x) (i32.const 4)))
        (local.set $grad (i32.add (local.get $grad) (i32.const 4)))
        (br $l1))))

  ;; ---------------------------------------------------------------------------------------
  ;; exp in float32 (Cephes' expf): n = nearest(x·log₂e), r = x − n·ln2 (ln2 in two parts, so r is
  ;; exact), exp(r) ≈ 1 + r + r²·P(r) with P of degree 5, times 2ⁿ built in the exponent bits.
  ;; x is clamped to [−87.3, 88.3], where 2ⁿ is a normal float; within 2 ulp of exp.
  ;; $exp1 applies the same float32 operations to one value as $exp4 to each lane.

  (func $exp4 (param $x v128) (result v128)
    (local $n v128) (local $r v128) (local $p v128)
    (local.set $x (f32x4.min (f32x4.max (local.get $x) (f32x4.splat (f32.const -87.3365478515625)))
      (f32x4.splat (f32.const 88.3762626647949))))
    (local.set $n (f32x4.nearest (f32x4.mul (local.get $x) (f32x4.splat (f32.const 1.44269504088896341)))))
    (local.set $r (f32x4.sub (f32x4.sub (local.get $x) (f32x4.mul (local.get $n) (f32x4.splat (f32.const 0.693359375))))
      (f32x4.mul (local.get $n) (f32x4.splat (f32.const -2.12194440e-4)))))
    (local.set $p (f32x4.splat (f32.const 1.9875691500e-4)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (f32x4.splat (f32.const 1.3981999507e-3))))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (f32x4.splat (f32.const 8.3334519073e-3))))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (f32x4.splat (f32.const 4.1665795894e-2))))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (f32x4.splat (f32.const 1.6666665459e-1))))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (f32x4.splat (f32.const 5.0000001201e-1))))
    (local.set $p (f32x4.add (f32x4.add (f32x4.mul (local.get $p) (f32x4.mul (local.get $r) (local.get $r))) (local.get $r))
      (f32x4.splat (f32.const 1))))
    (f32x4.mul (local.get $p)
      (i32x4.shl (i32x4.add (i32x4.trunc_sat_f32x4_s (local.get $n)) (i32x4.splat (i32.const 127))) (i32.const 23))))

  (func $exp1 (param $x f32) (result f32)
    (local $n f32) (local $r f32) (local $p f32)
    (local.set $x (f32.min (f32.max (local.get $x) (f32.const -87.3365478515625)) (f32.const 88.3762626647949)))
    (local.set $n (f32.nearest (f32.mul (local.get $x) (f32.const 1.44269504088896341))))
    (local.set $r (f32.sub (f32.sub (local.get $x) (f32.mul (local.get $n) (f32.const 0.693359375)))
      (f32.mul (local.get $n) (f32.const -2.12194440e-4))))
    (local.set $p (f32.const 1.9875691500e-4))
    (local.set $p (f32.add (f32.mul (local.get $p) (local.get $r)) (f32.const 1.3981999507e-3)))
    (local.set $p (f32.add (f32.mul (local.get $p) (local.get $r)) (f32.const 8.3334519073e-3)))
    (local.set $p (f32.add (f32.mul (local.get $p) (local.get $r)) (f32.const 4.1665795894e-2)))
    (local.set $p (f32.add (f32.mul (local.get $p) (local.get $r)) (f32.const 1.6666665459e-1)))
    (local.set $p (f32.add (f32.mul (local.get $p) (local.get $r)) (f32.const 5.0000001201e-1)))
    (local.set $p (f32.add (f32.add (f32.mul (local.get $p) (f32.mul (local.get $r) (local.get $r))) (local.get $r))
      (f32.const 1)))
    (f32.mul (local.get $p)
      (f32.reinterpret_i32 (i32.shl (i32.add (i32.trunc_sat_f32_s (local.get $n)) (i32.const 127)) (i32.const 23)))))

  ;; max of the four lanes.
  (func $hmax (param $v v128) (result f32)
    (f32.max
      (f32.max (f32x4.extract_lane 0 (local.get $v)) (f32x4.extract_lane 1 (local.get $v)))
      (f32.max (f32x4.extract_lane 2 (local.get $v)) (f32x4.extract_lane 3 (local.get $v)))))

  ;; ---------------------------------------------------------------------------------------
  ;; Causal softmax of attention scores, in place over p[len×len]: row i becomes
  ;;   p[i,j] = exp(s_j − max s) / Σ_{j′≤i} exp(s_j′ − max s),  s_j = scale·p[i,j],  for j ≤ i,
  ;; and 0 for j > i. Sums and maxima run in four lanes, combined as $hsum and $hmax, then the
  ;; (i+1) mod 4 last elements one by one.
  (func (export "softmax_causal") (param $p i32) (param $len i32) (param $scale f32)
    (local $i i32) (local $row i32) (local $end i32) (local $end4 i32) (local $q i32) (local $rowEnd i32)
    (local $v v128) (local $vs v128) (local $m f32) (local $sum f32) (local $x f32) (local $inv f32)
    (local.set $i (i32.const 0))
    (block $rows_done
      (loop $rows
        (br_if $rows_done (i32.ge_u (local.get $i) (local.get $len)))
        (local.set $row (call $at (local.get $p) (local.get $i) (i32.const 0) (local.get $len)))
        (local.set $end (i32.add (local.get $row) (i32.shl (i32.add (local.get $i) (i32.const 1)) (i32.const 2))))
        (local.set $end4 (i32.add (local.get $row) (i32.shl (i32.and (i32.add (local.get $i) (i32.const 1)) (i32.const -4)) (i32.const 2))))
        (local.set $rowEnd (i32.add (local.get $row) (i32.shl (local.get $len) (i32.const 2))))
        ;; s = scale·p and its maximum
        (local.set $vs (f32x4.splat (f32.const -inf)))
        (local.set $q (local.get $row))
        (block $d (loop $l
          (br_if $d (i32.ge_u (local.get $q) (local.get $end4)))
          (local.set $v (f32x4.mul (v128.load (local.get $q)) (f32x4.splat (local.get $scale))))
          (v128.store (local.get $q) (local.get $v))
          (local.set $vs (f32x4.max (local.get $vs) (local.get $v)))
          (local.set $q (i32.add (local.get $q) (i32.const 16)))
          (br $l)))
        (local.set $m (call $hmax (local.get $vs)))
        (block $d (loop $l
          (br_if $d (i32.ge_u (local.get $q) (local.get $end)))
          (local.set $x (f32.mul (f32.load (local.get $q)) (local.get $scale)))
          (f32.store (local.get $q) (local.get $x))
          (local.set $m (f32.max (local.get $m) (local.get $x)))
          (local.set $q (i32.add (local.get $q) (i32.const 4)))
          (br $l)))
        ;; e = exp(s − max) and its sum
        (local.set $vs (v128.const i32x4 0 0 0 0))
        (local.set $q (local.get $row))
        (block $d (loop $l
          (br_if $d (i32.ge_u (local.get $q) (local.get $end4)))
          (local.set $v (call $exp4 (f32x4.sub (v128.load (local.get $q)) (f32x4.splat (local.get $m)))))
          (v128.store (local.get $q) (local.get $v))
          (local.set $vs (f32x4.add (local.get $vs) (local.get $v)))
          (local.set $q (i32.add (local.get $q) (i32.const 16)))
          (br $l)))
        (local.set $sum (call $hsum (local.get $vs)))
        (block $d (loop $l
          (br_if $d (i32.ge_u (local.get $q) (local.get $end)))
          (local.set $x (call $exp1 (f32.sub (f32.load (local.get $q)) (local.get $m))))
          (f32.store (local.get $q) (local.get $x))
          (local.set $sum (f32.add (local.get $sum) (local.get $x)))
          (local.set $q (i32.add (local.get $q) (i32.const 4)))
          (br $l)))
        ;; e / sum, then zeros above the diagonal
        (local.set $inv (f32.div (f32.const 1) (local.get $sum)))
        (local.set $q (local.get $row))
        (block $d (loop $l
          (br_if $d (i32.ge_u (local.get $q) (local.get $end4)))
          (v128.store (local.get $q) (f32x4.mul (v128.load (local.get $q)) (f32x4.splat (local.get $inv))))
          (local.set $q (i32.add (local.get $q) (i32.const 16)))
          (br $l)))
        (block $d (loop $l
          (br_if $d (i32.ge_u (local.get $q) (local.get $end)))
          (f32.store (local.get $q) (f32.mul (f32.load (local.get $q)) (local.get $inv)))
          (local.set $q (i32.add (local.get $q) (i32.const 4)))
          (br $l)))
        (memory.fill (local.get $end) (i32.const 0) (i32.sub (local.get $rowEnd) (local.get $end)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $rows))))

  ;; Backward of softmax_causal, in place over dp[len×len] given its output p[len×len]: row i becomes
  ;;   dS[i,j] = p[i,j]·(dp[i,j] − Σ_{j′≤i} p[i,j′]·dp[i,j′])·scale  for j ≤ i, and 0 for j > i.
  (func (export "softmax_causal_backward") (param $dp i32) (param $p i32) (param $len i32) (param $scale f32)
    (local $i i32) (local $row i32) (local $prow i32) (local $end i32) (local $end4 i32) (local $q i32) (local $o i32)
    (local $rowEnd i32) (local $vs v128) (local $dot f32) (local $vd v128)
    (local.set $i (i32.const 0))
    (block $rows_done
      (loop $rows
        (br_if $rows_done (i32.ge_u (local.get $i) (local.get $len)))
        (local.set $row (call $at (local.get $dp) (local.get $i) (i32.const 0) (local.get $len)))
        (local.set $prow (call $at (local.get $p) (local.get $i) (i32.const 0) (local.get $len)))
        (local.set $o (i32.sub (local.get $prow) (local.get $row)))
        (local.set $end (i32.add (local.get $row) (i32.shl (i32.add (local.get $i) (i32.const 1)) (i32.const 2))))
        (local.set $end4 (i32.add (local.get $row) (i32.shl (i32.and (i32.add (local.get $i) (i32.const 1)) (i32.const -4)) (i32.const 2))))
        (local.set $rowEnd (i32.add (local.get $row) (i32.shl (local.get $len) (i32.const 2))))
        (local.set $vs (v128.const i32x4 0 0 0 0))
        (local.set $q (local.get $row))
        (block $d (loop $l
          (br_if $d (i32.ge_u (local.get $q) (local.get $end4)))
          (local.set $vs (f32x4.add (local.get $vs)
            (f32x4.mul (v128.load (i32.add (local.get $q) (local.get $o))) (v128.load (local.get $q)))))
          (local.set $q (i32.add (local.get $q) (i32.const 16)))
          (br $l)))
        (local.set $dot (call $hsum (local.get $vs)))
        (block $d (loop $l
          (br_if $d (i32.ge_u (local.get $q) (local.get $end)))
          (local.set $dot (f32.add (local.get $dot)
            (f32.mul (f32.load (i32.add (local.get $q) (local.get $o))) (f32.load (local.get $q)))))
          (local.set $q (i32.add (local.get $q) (i32.const 4)))
          (br $l)))
        (local.set $vd (f32x4.splat (local.get $dot)))
        (local.set $q (local.get $row))
        (block $d (loop $l
          (br_if $d (i32.ge_u (local.get $q) (local.get $end4)))
          (v128.store (local.get $q)
            (f32x4.mul (f32x4.mul (v128.load (i32.add (local.get $q) (local.get $o)))
              (f32x4.sub (v128.load (local.get $q)) (local.get $vd))) (f32x4.splat (local.get $scale))))
          (local.set $q (i32.add (local.get $q) (i32.const 16)))
          (br $l)))
        (block $d (loop $l
          (br_if $d (i32.ge_u (local.get $q) (local.get $end)))
          (f32.store (local.get $q)
            (f32.mul (f32.mul (f32.load (i32.add (local.get $q) (local.get $o)))
              (f32.sub (f32.load (local.get $q)) (local.get $dot))) (local.get $scale)))
          (local.set $q (i32.add (local.get $q) (i32.const 4)))
          (br $l)))
        (memory.fill (local.get $end) (i32.const 0) (i32.sub (local.get $rowEnd) (local.get $end)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $rows))))

  ;; ---------------------------------------------------------------------------------------
  ;; The log-softmax of the logits x[rows×n], in two halves around the logarithm (which stays in
  ;; the caller's double precision):
  ;;   softmax_stats:   out[2r] = m_r = max_v x[r,v],  out[2r+1] = Σ_v exp(x[r,v] − m_r)
  ;;                    (so log Σ_v exp(x[r,v]) = m_r + log out[2r+1]);
  ;;   logits_backward: x[r,v] = −g_r·exp(x[r,v] − lse_r) in place, with lse and g float64 arrays
  ;;                    (the gradient of g_r·log softmax(x_r)[t] but for the g_r the caller adds at t).
  ;; Maxima and sums run in four lanes, combined as $hmax and $hsum, then the n mod 4 last one by one.
  (func (export "softmax_stats") (param $x i32) (param $rows i32) (param $n i32) (param $out i32)
    (local $r i32) (local $q i32) (local $end i32) (local $end4 i32) (local $vs v128) (local $m f32) (local $sum f32)
    (local.set $r (i32.const 0))
    (block $rows_done
      (loop $rows
        (br_if $rows_done (i32.ge_u (local.get $r) (local.get $rows)))
        (local.set $end (i32.add (local.get $x) (i32.shl (local.get $n) (i32.const 2))))
        (local.set $end4 (i32.add (local.get $x) (i32.shl (i32.and (local.get $n) (i32.const -4)) (i32.const 2))))
        (local.set $vs (f32x4.splat (f32.const -inf)))
        (local.set $q (local.get $x))
        (block $d (loop $l
          (br_if $d (i32.ge_u (local.get $q) (local.get $end4)))
          (local.set $vs (f32x4.max (local.get $vs) (v128.load (local.get $q))))
          (local.set $q (i32.add (local.get $q) (i32.const 16)))
          (br $l)))
        (local.set $m (call $hmax (local.get $vs)))
        (block $d (loop $l
          (br_if $d (i32.ge_u (local.get $q) (local.get $end)))
          (local.set $m (f32.max (local.get $m) (f32.load (local.get $q))))
          (local.set $q (i32.add (local.get $q) (i32.const 4)))
          (br $l)))
        (local.set $vs (v128.const i32x4 0 0 0 0))
        (local.set $q (local.get $x))
        (block $d (loop $l
          (br_if $d (i32.ge_u (local.get $q) (local.get $end4)))
          (local.set $vs (f32x4.add (local.get $vs)
            (call $exp4 (f32x4.sub (v128.load (local.get $q)) (f32x4.splat (local.get $m))))))
          (local.set $q (i32.add (local.get $q) (i32.const 16)))
          (br $l)))
        (local.set $sum (call $hsum (local.get $vs)))
        (block $d (loop $l
          (br_if $d (i32.ge_u (local.get $q) (local.get $end)))
          (local.set $sum (f32.add (local.get $sum) (call $exp1 (f32.sub (f32.load (local.get $q)) (local.get $m)))))
          (local.set $q (i32.add (local.get $q) (i32.const 4)))
          (br $l)))
        (f32.store (local.get $out) (local.get $m))
        (f32.store offset=4 (local.get $out) (local.get $sum))
        (local.set $out (i32.add (local.get $out) (i32.const 8)))
        (local.set $x (local.get $end))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br $rows))))

  (func (export "logits_backward") (param $x i32) (param $rows i32) (param $n i32) (param $lse i32) (param $g i32)
    (local $r i32) (local $q i32) (local $end i32) (local $end4 i32) (local $l f32) (local $ng f32)
    (local.set $r (i32.const 0))
    (block $rows_done
      (loop $rows
        (br_if $rows_done (i32.ge_u (local.get $r) (local.get $rows)))
        (local.set $end (i32.add (local.get $x) (i32.shl (local.get $n) (i32.const 2))))
        (local.set $end4 (i32.add (local.get $x) (i32.shl (i32.and (local.get $n) (i32.const -4)) (i32.const 2))))
        (local.set $l (f32.demote_f64 (f64.load (local.get $lse))))
        (local.set $ng (f32.neg (f32.demote_f64 (f64.load (local.get $g)))))
        (local.set $q (local.get $x))
        (block $d (loop $lp
          (br_if $d (i32.ge_u (local.get $q) (local.get $end4)))
          (v128.store (local.get $q) (f32x4.mul (f32x4.splat (local.get $ng))
            (call $exp4 (f32x4.sub (v128.load (local.get $q)) (f32x4.splat (local.get $l))))))
          (local.set $q (i32.add (local.get $q) (i32.const 16)))
          (br $lp)))
        (block $d (loop $lp
          (br_if $d (i32.ge_u (local.get $q) (local.get $end)))
          (f32.store (local.get $q) (f32.mul (local.get $ng)
            (call $exp1 (f32.sub (f32.load (local.get $q)) (local.get $l)))))
          (local.set $q (i32.add (local.get $q) (i32.const 4)))
          (br $lp)))
        (local.set $x (local.get $end))
        (local.set $lse (i32.add (local.get $lse) (i32.const 8)))
        (local.set $g (i32.add (local.get $g) (i32.const 8)))
        (local.set $r (i32.add (local.get $r) (i32.const 1)))
        (br $rows))))

  ;; ---------------------------------------------------------------------------------------
  ;; dst[cols×rows] = src[rows×cols]ᵀ, in tiles of 16×16 so that both sides stay in cache.
  (func (export "transpose") (param $dst i32) (param $src i32) (param $rows i32) (param $cols i32)
    (local $r0 i32) (local $c0 i32) (local $r1 i32) (local $c1 i32) (local $r i32) (local $col i32)
    (local $s i32) (local $d i32) (local $dstride i32)
    (local.set $dstride (i32.shl (local.get $rows) (i32.const 2)))
    (local.set $r0 (i32.const 0))
    (block $done
      (loop $rtiles
        (br_if $done (i32.ge_u (local.get $r0) (local.get $rows)))
        (local.set $r1 (i32.add (local.get $r0) (i32.const 16)))
        (if (i32.gt_u (local.get $r1) (local.get $rows)) (then (local.set $r1 (local.get $rows))))
        (local.set $c0 (i32.const 0))
        (block $cdone
          (loop $ctiles
            (br_if $cdone (i32.ge_u (local.get $c0) (local.get $cols)))
            (local.set $c1 (i32.add (local.get $c0) (i32.const 16)))
            (if (i32.gt_u (local.get $c1) (local.get $cols)) (then (local.set $c1 (local.get $cols))))
            (local.set $r (local.get $r0))
            (block $rdone
              (loop $rl
                (br_if $rdone (i32.ge_u (local.get $r) (local.get $r1)))
                (local.set $s (call $at (local.get $src) (local.get $r) (local.get $c0) (local.get $cols)))
                (local.set $d (call $at (local.get $dst) (local.get $c0) (local.get $r) (local.get $rows)))
                (local.set $col (local.get $c0))
                (block $kdone
                  (loop $kl
                    (br_if $kdone (i32.ge_u (local.get $col) (local.get $c1)))
                    (f32.store (local.get $d) (f32.load (local.get $s)))
                    (local.set $s (i32.add (local.get $s) (i32.const 4)))
                    (local.set $d (i32.add (local.get $d) (local.get $dstride)))
                    (local.set $col (i32.add (local.get $col) (i32.const 1)))
                    (br $kl)))
                (local.set $r (i32.add (local.get $r) (i32.const 1)))
                (br $rl)))
            (local.set $c0 (local.get $c1))
            (br $ctiles)))
        (local.set $r0 (local.get $r1))
        (br $rtiles)))))
