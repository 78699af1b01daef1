module {
  tosa.variable @d = dense<[[[-32777673, -308262479, -215239311], [446101499, 337463389, 365253486]], [[100134273, -416176167, 264884554], [111431879, 438913189, -22337594]]]> : tensor<2x2x3xi32>
  func.func @main(%arg0: tensor<2x2x3xi32> {tosa.tensor_name = "input-0"}) -> (tensor<2x2x3xi32> {tosa.tensor_name = "result-0"}, tensor<2x2x3xi32> {tosa.tensor_name = "result-1"}) {
    %v0 = tosa.variable_read @d : tensor<2x2x3xi32>
    tosa.variable_write @d, %arg0 : tensor<2x2x3xi32>
    %v1 = tosa.variable_read @d : tensor<2x2x3xi32>
    return %v0, %v1 : tensor<2x2x3xi32>, tensor<2x2x3xi32>
  }
}
