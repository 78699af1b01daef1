module {
  tosa.variable @a = dense<[[8139, 2227, 7195], [4797, 5620, -6751], [4540, 1691, -1721], [-3075, 2313, -4952]]> : tensor<4x3xi16>
  tosa.variable @b = dense<[[-5171, 6128, 4251], [1490, 4222, -2909], [3625, -4822, -905], [-5782, -1996, -2617]]> : tensor<4x3xi16>
  func.func @main(%arg0: tensor<4x3xi16> {tosa.tensor_name = "input-0"}) -> (tensor<4x3xi16> {tosa.tensor_name = "result-0"}, tensor<4x3xi16> {tosa.tensor_name = "result-1"}, tensor<4x3xi16> {tosa.tensor_name = "result-2"}) {
    %a0 = tosa.variable_read @a : tensor<4x3xi16>
    %b0 = tosa.variable_read @b : tensor<4x3xi16>
    tosa.variable_write @b, %a0 : tensor<4x3xi16>
    tosa.variable_write @a, %arg0 : tensor<4x3xi16>
    %a1 = tosa.variable_read @a : tensor<4x3xi16>
    %b1 = tosa.variable_read @b : tensor<4x3xi16>
    return %b0, %a1, %b1 : tensor<4x3xi16>, tensor<4x3xi16>, tensor<4x3xi16>
  }
}
